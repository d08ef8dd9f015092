// Limits on input from outside: JSON depth and size, UTF-8, and the names a
// branch is made of.
#include "inflight/core/bounded_json.hpp"

#include <gtest/gtest.h>

#include "inflight/core/branch_name.hpp"

namespace inflight {
namespace {

std::string parse_error(const std::string& text, JsonLimits limits = {}) {
  const auto parsed = parse_bounded_json(text, limits);
  return parsed ? "<parsed>" : parsed.error().message;
}

TEST(BoundedJson, RefusesDepthBeforeParsingAndSizeBeforeScanning) {
  EXPECT_EQ(parse_error(std::string(64, '[') + std::string(64, ']')), "<parsed>");
  EXPECT_EQ(parse_error(std::string(65, '[') + std::string(65, ']')),
            "nested deeper than 64 levels");
  // 100k levels would overflow the recursive parser's stack.
  EXPECT_EQ(parse_error("{\"tests\":" + std::string(100000, '[')), "nested deeper than 64 levels");
  // Brackets inside strings do not count, escaped quotes do not end them.
  EXPECT_EQ(parse_error("[\"" + std::string(100, '[') + "\\\"\"]"), "<parsed>");
  EXPECT_EQ(parse_error("[1, 2, 3]", {.max_bytes = 4, .max_depth = 64}), "larger than 4 bytes");
  EXPECT_EQ(parse_error("{\"a\":"), "not valid JSON");
  EXPECT_EQ(parse_error("[\"\xff\"]"), "not valid UTF-8");
}

// canonical_json writes what the sorted document dumps, without the document; each text here
// is one case where the two could part.
TEST(CanonicalJson, IsWhatTheSortedDocumentDumps) {
  const std::string texts[] = {
      R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true})",
      R"( { "b" : 1 , "a" : [ 1 , { "d" : null , "c" : false } , [ ] , { } ] } )",
      R"({"k":1,"k":{"x":2},"j":0,"k":[3]})",  // a key given again keeps its last value
      R"({"a\n":1,"a ":2,"a\"":3,"a\\":4,"\u00e9":5,"e":6,"":7})",  // escaped keys sort parsed
      R"([0,-0,1.0,-0.0,1e2,1E-7,0.1,123456789012345678901234567890,-9223372036854775808])",
      R"([18446744073709551615,18446744073709551616,9223372036854775807,1.7976931348623157e308])",
      R"(["\u0000\u001f\u007f\"\\\/\b\f\n\r\t","\ud83d\ude42","caf\u00e9","café"])", R"("top")",
      "42", "null", "true", "[]", "{}", R"({"a":{"b":{"c":{}}},"a":[]})",
      R"({"z":[{"y":1,"x":2},{"w":[{"v":3,"u":4}]}],"m":"\u2028"})",
      std::string(64, '[') + std::string(64, ']'),
      // refused by both
      std::string(65, '[') + std::string(65, ']'), R"({"a":})", R"({"a":1,})", "[1e400]",
      "[\"\xff\"]", R"(["\ud800"])", "", "{} {}", "[1] x", "01", "[NaN]"};
  const JsonLimits limits{.max_bytes = 1 << 20, .max_depth = 64};
  for (const auto& text : texts) {
    const auto sorted = parse_bounded_json_sorted(text, limits);
    const auto canonical = canonical_json(text, limits);
    ASSERT_EQ(canonical.has_value(), sorted.has_value()) << printable(text);
    if (sorted)
      EXPECT_EQ(*canonical, sorted->dump()) << printable(text);
    else
      EXPECT_EQ(canonical.error().message, sorted.error().message) << printable(text);
  }
}

TEST(Utf8, ValidatesAndShowsInvalidBytesEscaped) {
  EXPECT_TRUE(is_valid_utf8("plain"));
  EXPECT_TRUE(is_valid_utf8("caf\xc3\xa9 \xf0\x9f\x99\x82"));
  EXPECT_FALSE(is_valid_utf8("\xff"));
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xe2\x82"));          // truncated
  EXPECT_EQ(printable("a\xff"
                      "b\xc3\xa9"),
            "a\\xffb\xc3\xa9");
}

// is_valid_utf8 skips ASCII a word at a time: a bad byte or a sequence at any offset of a
// long text, across a word's edge too, must still be seen.
TEST(Utf8, LongTextIsCheckedAtEveryOffset) {
  for (std::size_t at = 0; at < 40; ++at) {
    std::string text(40, 'a');
    EXPECT_TRUE(is_valid_utf8(text.substr(0, at) + "\xe2\x82\xac" + text.substr(at))) << at;
    EXPECT_FALSE(is_valid_utf8(text.substr(0, at) + "\xe2\x82" + text.substr(at))) << at;
    text[at] = '\x80';
    EXPECT_FALSE(is_valid_utf8(text)) << at;
  }
}

// Journal and log lines are written with append_json_string instead of a dump: the two must
// agree on every byte, alone and amid text, and on text that is not UTF-8.
TEST(JsonString, IsWhatNlohmannDumpsForEveryByte) {
  const auto dumped = [](std::string_view text) {
    return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  const auto appended = [](std::string_view text) {
    std::string out = "prefix ";
    append_json_string(out, text);
    return out.substr(7);
  };
  for (int byte = 0; byte < 256; ++byte) {
    const std::string text = "a" + std::string(1, static_cast<char>(byte)) + "z\"\\\x7f";
    EXPECT_EQ(appended(text), dumped(text)) << byte;
  }
  for (const std::string_view text :
       {"", "caf\xc3\xa9 \xf0\x9f\x99\x82\n", "\xe2\x82 torn", "data: {\"usage\":null}\n\n"})
    EXPECT_EQ(appended(text), dumped(text)) << printable(text);
}

// Text of 32 bytes or more is escaped sixteen bytes at a time, shorter text a byte at a time:
// each byte that needs an escape is found at every place of a block, beside others, and in the
// short block at the end, on both sides of the 32 bytes.
TEST(JsonString, FindsEveryEscapeAtEveryPlaceOfABlock) {
  const auto dumped = [](std::string_view text) {
    return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  for (const std::size_t length :
       {std::size_t{3}, std::size_t{31}, std::size_t{32}, std::size_t{40}})
    for (int byte = 0; byte < 0x80; ++byte)
      for (std::size_t at = 0; at < length; ++at) {
        std::string text(length, 'a');
        text[at] = static_cast<char>(byte);
        text.replace(at / 3, 2, "\"\n");
        std::string out = "x";
        append_utf8_json_string(out, text);
        EXPECT_EQ(out.substr(1), dumped(text)) << byte << " at " << at << " of " << length;
      }
  const std::string mixed = "caf\xc3\xa9 \"\xf0\x9f\x99\x82\"\x01\t\\ " + std::string(30, '\x7f');
  const std::string widest(31, '\x01');  // every byte six wide
  for (const auto& text : {mixed, widest, mixed.substr(0, 20)}) {
    std::string out;
    append_utf8_json_string(out, text);
    EXPECT_EQ(out, dumped(text)) << printable(text);
  }
}

// Text known to be UTF-8 is appended unchecked: the same bytes as the checked form.
TEST(JsonString, TheUncheckedFormOfValidUtf8IsTheCheckedOne) {
  for (const std::string_view text :
       {"", "caf\xc3\xa9 \xf0\x9f\x99\x82\n\t\"q\"\x01\x7f", "data: {\"usage\":null}\n\n"}) {
    std::string checked, unchecked;
    append_json_string(checked, text);
    append_utf8_json_string(unchecked, text);
    EXPECT_EQ(unchecked, checked) << printable(text);
  }
}

TEST(BranchName, OneRuleForRunIdsPodsAndRefs) {
  using namespace checkpoint;
  EXPECT_TRUE(is_valid_run_id("r-20261121T101500Z-a1b2c3"));
  EXPECT_TRUE(is_valid_run_id(std::string(64, 'a')));
  for (const auto* bad : {"", "-r", ".r", "a/b", "a b", "..", "r\xc3\xa9"})
    EXPECT_FALSE(is_valid_run_id(bad)) << bad;
  EXPECT_FALSE(is_valid_run_id(std::string(65, 'a')));
  EXPECT_TRUE(is_valid_pod_name("evals-7d9c-abc12"));
  for (const auto* bad : {"", ".pod", "a..b", "a/b", "a:b", "a b", "p\xff", "x.lock", "a@{b"})
    EXPECT_FALSE(is_valid_pod_name(bad)) << bad;
  const auto ref = branch_ref({.pod = "pod-a", .run_id = "r-1"});
  EXPECT_EQ(ref, "refs/heads/inflight/pod-a/r-1");
  EXPECT_EQ(short_branch(ref), "inflight/pod-a/r-1");
  const auto parsed = parse_branch_ref(ref);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->pod, "pod-a");
  EXPECT_EQ(parsed->run_id, "r-1");
  EXPECT_FALSE(parse_branch_ref("refs/heads/inflight/p\xff/r-1").has_value());
  EXPECT_FALSE(parse_branch_ref("refs/heads/inflight/pod/r/x").has_value());
}

}  // namespace
}  // namespace inflight
