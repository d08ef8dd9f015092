// What the model listener reads from a child's request head before anything
// goes upstream: the model, the path under its base path, and the token.
#include "models/child_request.hpp"

#include <gtest/gtest.h>

namespace inflight::models {
namespace {

TEST(ChildRequest, ATargetNamesAModelAndAPathUnderIt) {
  const auto call = parse_call_target("/models/openai/v1/chat/completions?stream=true");
  ASSERT_TRUE(call);
  EXPECT_EQ(call->model, "openai");
  EXPECT_EQ(call->path, "/v1/chat/completions");
  EXPECT_EQ(call->query, "stream=true");
  EXPECT_EQ(parse_call_target("/models/openai")->path, "/");
  EXPECT_FALSE(parse_call_target("/v1/chat/completions"));
  EXPECT_FALSE(parse_call_target("/models/Not A Name/v1"));
}

// A dot segment would take the upstream request out of the model's base path, with its key.
TEST(ChildRequest, APathThatLeavesTheBasePathIsRefused) {
  for (const auto* target :
       {"/models/openai/../../admin", "/models/openai/v1/..", "/models/openai/./v1",
        "/models/openai/%2e%2e/admin", "/models/openai/%2E./admin", "/models/openai/.%2e"})
    EXPECT_FALSE(parse_call_target(target)) << target;
  for (const auto* target : {"/models/openai/v1/..x", "/models/openai/v1/.well-known",
                             "/models/openai/v1/a%2eb", "/models/openai/v1?q=/../"})
    EXPECT_TRUE(parse_call_target(target)) << target;
}

TEST(ChildRequest, TheTokenIsABearerOrAnAnthropicKey) {
  ChildRequest request;
  request.set(boost::beast::http::field::authorization, "Bearer inflight-1");
  EXPECT_EQ(token_of(request), "inflight-1");
  ChildRequest anthropic;
  anthropic.set("x-api-key", "inflight-2");
  EXPECT_EQ(token_of(anthropic), "inflight-2");
  EXPECT_EQ(token_of(ChildRequest{}), "");
}

}  // namespace
}  // namespace inflight::models
