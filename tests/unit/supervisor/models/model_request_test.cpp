// A request's identity for replay: the canonical body (what is ignored, what still counts) and
// the digest, which must change with every part of the request and only with them.
#include "inflight/supervisor/models/model_request.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace inflight::models {
namespace {

const std::vector<std::string> kNoIgnoredFields;

RequestParts chat_request() {
  return {.model = "openai",
          .method = "POST",
          .path = "/v1/chat/completions",
          .query = "",
          .identity_headers = {{"openai-beta", "assistants=v2"}},
          .body = R"({"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]})"};
}

// ---------------------------------------------------------------- canonical body

TEST(CanonicalBody, IgnoresKeyOrderAndWhitespace) {
  const auto a = canonical_body(R"({ "b" : 1,
    "a": {"d": 2, "c": [1, 2]} })",
                                kNoIgnoredFields);
  const auto b = canonical_body(R"({"a":{"c":[1,2],"d":2},"b":1})", kNoIgnoredFields);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, R"({"a":{"c":[1,2],"d":2},"b":1})");
}

TEST(CanonicalBody, KeepsValuesArrayOrderAndTypes) {
  const auto base = canonical_body(R"({"a":[1,2],"n":1})", kNoIgnoredFields);
  EXPECT_NE(base, canonical_body(R"({"a":[2,1],"n":1})", kNoIgnoredFields));
  EXPECT_NE(base, canonical_body(R"({"a":[1,2],"n":"1"})", kNoIgnoredFields));
  EXPECT_NE(base, canonical_body(R"({"a":[1,2],"n":2})", kNoIgnoredFields));
}

// Journals recorded by earlier versions replay only if the canonical form never changes:
// it is what the first scheme wrote, an ordered parse copied into a sorted document.
TEST(CanonicalBody, IsTheSortedCopyOfTheOrderedParseByteForByte) {
  for (const char* text :
       {R"({"b":1,"a":2,"b":3})", R"({"z":{"y":[{"b":1,"a":null}],"x":true},"a":-0})",
        R"({"n":[1.0,1e2,-1.5e-7,18446744073709551615,-9223372036854775808,0.1]})",
        R"({"s":"\u0000\u001f\"\\\/\ud83d\ude00","":"empty key","\u00e9":1,"e":2})",
        R"([{"b":2,"a":1},"x",3])", R"("just a string")", R"(42)"}) {
    const auto old_form = nlohmann::json(nlohmann::ordered_json::parse(text)).dump();
    EXPECT_EQ(canonical_body(text, kNoIgnoredFields), old_form) << text;
  }
}

TEST(CanonicalBody, KeepsUnicodeTextAsUtf8) {
  EXPECT_EQ(canonical_body("{\"t\": \"caf\xc3\xa9 \\u00e9\"}", kNoIgnoredFields),
            "{\"t\":\"caf\xc3\xa9 \xc3\xa9\"}");
}

TEST(CanonicalBody, DropsIgnoredFields) {
  const std::vector<std::string> ignored{"/metadata/user_id", "/messages/0", "/a~1b", "/m~0n"};
  const auto body =
      canonical_body(R"({"metadata":{"user_id":"u-1","keep":true},"messages":["x","y"],)"
                     R"("a/b":1,"m~n":2,"z":3})",
                     ignored);
  EXPECT_EQ(body, R"({"messages":["y"],"metadata":{"keep":true},"z":3})");
  EXPECT_EQ(canonical_body(R"({"metadata":{"user_id":"u-2","keep":true},"messages":["w","y"],)"
                           R"("z":3})",
                           ignored),
            body);
}

TEST(CanonicalBody, SkipsPointersThatDoNotResolveOrAreInvalid) {
  const std::string text = R"({"arr":[1,2],"obj":{"k":1},"s":"v"})";
  const std::vector<std::string> ignored{
      "",  // the whole document: never dropped
      "no-slash", "/a~2",   "/obj/k~", "/missing", "/missing/deeper", "/arr/01",
      "/arr/2",   "/arr/-", "/arr/x",  "/s/0",     "/obj/k/deeper"};
  EXPECT_EQ(canonical_body(text, ignored), canonical_body(text, kNoIgnoredFields));
  EXPECT_EQ(canonical_body(text, ignored), R"({"arr":[1,2],"obj":{"k":1},"s":"v"})");
}

TEST(CanonicalBody, ComparesWhatIsNotJsonAsItsBytes) {
  EXPECT_EQ(canonical_body("a=1&b=2", {"/a"}), "a=1&b=2");
  EXPECT_EQ(canonical_body("{\"a\": 1", kNoIgnoredFields), "{\"a\": 1");
  const std::string not_utf8 = "{\"a\": \"\xff\xfe\"}";
  EXPECT_EQ(canonical_body(not_utf8, kNoIgnoredFields), not_utf8);
  EXPECT_NE(canonical_body("x y", kNoIgnoredFields), canonical_body("x  y", kNoIgnoredFields));
  const std::string multipart =
      "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n{}\r\n--b--";
  EXPECT_EQ(canonical_body(multipart, kNoIgnoredFields), multipart);
  EXPECT_EQ(canonical_body("", kNoIgnoredFields), "");
}

TEST(CanonicalBody, ComparesJsonNestedTooDeepAsItsBytes) {
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  EXPECT_EQ(canonical_body(deep, kNoIgnoredFields), deep);
  const std::string spaced = "[ " + std::string(63, '[') + std::string(64, ']');
  EXPECT_EQ(canonical_body(spaced, kNoIgnoredFields), std::string(64, '[') + std::string(64, ']'));
}

// ---------------------------------------------------------------- digest

TEST(ModelRequestDigest, IsSha256InLowerCaseHexAndStable) {
  const auto digest = request_digest(chat_request(), kNoIgnoredFields);
  ASSERT_EQ(digest.size(), 64u);
  EXPECT_EQ(digest.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(request_digest(chat_request(), kNoIgnoredFields), digest);
}

TEST(ModelRequestDigest, IgnoresWhatTheCanonicalBodyIgnores) {
  auto reordered = chat_request();
  reordered.body = R"({ "messages": [{"content": "hi", "role": "user"}], "model": "gpt-4o" })";
  EXPECT_EQ(request_digest(reordered, kNoIgnoredFields),
            request_digest(chat_request(), kNoIgnoredFields));

  auto a = chat_request();
  auto b = chat_request();
  a.body = R"({"model":"m","metadata":{"user_id":"1"}})";
  b.body = R"({"model":"m","metadata":{"user_id":"2"}})";
  EXPECT_NE(request_digest(a, kNoIgnoredFields), request_digest(b, kNoIgnoredFields));
  EXPECT_EQ(request_digest(a, {"/metadata/user_id"}), request_digest(b, {"/metadata/user_id"}));
}

TEST(ModelRequestDigest, DiffersByEachPart) {
  std::vector<RequestParts> variants(9, chat_request());
  variants[1].model = "anthropic";
  variants[2].method = "GET";
  variants[3].path = "/v1/responses";
  variants[4].query = "api-version=2024-10-21";
  variants[5].identity_headers = {{"openai-beta", "assistants=v1"}};
  variants[6].identity_headers = {};
  variants[7].identity_headers = {{"anthropic-beta", "assistants=v2"}};
  variants[8].body = R"({"model":"gpt-4o","messages":[{"role":"user","content":"hello"}]})";
  std::set<std::string> digests;
  for (const auto& parts : variants) digests.insert(request_digest(parts, kNoIgnoredFields));
  EXPECT_EQ(digests.size(), variants.size());
}

TEST(ModelRequestDigest, KeepsPartsApartWhereTheirBytesWouldJoinAlike) {
  auto a = chat_request();
  auto b = chat_request();
  a.model = "open";
  a.method = "aiPOST";
  b.model = "openai";
  b.method = "POST";
  EXPECT_NE(request_digest(a, kNoIgnoredFields), request_digest(b, kNoIgnoredFields));

  a = b = chat_request();
  a.identity_headers = {{"anthropic-version", "2023-06-01"}, {"anthropic-beta", ""}};
  b.identity_headers = {{"anthropic-version", "2023-06-01anthropic-beta"}};
  EXPECT_NE(request_digest(a, kNoIgnoredFields), request_digest(b, kNoIgnoredFields));
}

}  // namespace
}  // namespace inflight::models
