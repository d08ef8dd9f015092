// The agent protocol read as each side reads it: what one side writes, the
// other reads back field for field, and whatever else the agent might print
// is a failure that names what is wrong.
#include "inflight/checkpoint/agent_protocol.hpp"

#include <gtest/gtest.h>

#include "inflight/checkpoint/agent_commands.hpp"

namespace inflight {
namespace {

std::string wire(const OrderedJson& message) {
  return message.dump();
}

TEST(AgentProtocol, EveryFieldOfARequestSurvivesTheWire) {
  const agent::SaveAll call{.runs = {{.run_dir = "/runs/r1",
                                      .origin_pod = "pod-a",
                                      .run_id = "r1",
                                      .attempt = 2,
                                      .reason = checkpoint::CheckpointReason::periodic,
                                      .records = 7}},
                            .lease_until = 1'700'000'000};
  const AgentRequest request{.version = kAgentProtocolVersion,
                             .op = std::string(agent::SaveAll::op),
                             .store = {.cache_dir = "/cache.git",
                                       .url = "git://h/r.git",
                                       .username = "",
                                       .token = "secret",
                                       .ssh_key = "",
                                       .known_hosts = "",
                                       .ca_file = "",
                                       .excludes = {"*.tmp"},
                                       .restore_max_bytes = 1,
                                       .restore_max_files = 2,
                                       .claim_lease_seconds = 120,
                                       .publish = true,
                                       .sweep_temp_after_seconds = 90,
                                       .results_ref_retention_seconds = 45},
                             .pod = "pod-b",
                             .call = call};
  const auto read = OrderedJson::parse(wire(request)).get<AgentRequest>();
  EXPECT_EQ(read.op, "save_all");
  EXPECT_EQ(read.pod, "pod-b");
  EXPECT_EQ(read.store.token, "secret");
  EXPECT_EQ(read.store.excludes, std::vector<std::string>{"*.tmp"});
  EXPECT_EQ(read.store.sweep_temp_after_seconds, 90);
  EXPECT_EQ(read.store.results_ref_retention_seconds, 45);
  const auto read_call = read.call.get<agent::SaveAll>();
  ASSERT_EQ(read_call.runs.size(), 1u);
  EXPECT_EQ(read_call.runs[0].run_dir, "/runs/r1");
  EXPECT_EQ(read_call.runs[0].attempt, 2);
  EXPECT_EQ(read_call.runs[0].records, 7u);
  EXPECT_EQ(read_call.lease_until, 1'700'000'000);
}

// The wire carries a reason as the word its commit's subject carries.
TEST(AgentProtocol, AReasonTravelsAsItsWord) {
  for (const auto& [reason, word] : checkpoint::kCheckpointReasons) {
    agent::RunCheckpoint run;
    run.reason = reason;
    const OrderedJson json = run;
    EXPECT_EQ(json.at("reason"), word);
    EXPECT_EQ(json.get<agent::RunCheckpoint>().reason, reason);
  }
  OrderedJson unknown = agent::RunCheckpoint{};
  unknown["reason"] = "bogus";
  EXPECT_THROW(unknown.get<agent::RunCheckpoint>(), std::runtime_error);
}

TEST(AgentProtocol, AnAnswerAndItsPartsAreReadBack) {
  const checkpoint::LeftOut left_out{.named = {{.path = "out/fifo", .rule = "FIFO"}}, .unnamed = 3};
  const agent::SavedAll saved{
      .runs = {agent::Saved{.commit = "abc", .left_out = left_out},
               Error{.kind = Failure::rejected, .message = "taken", .candidates = {}},
               Error{.kind = Failure::over_limit, .message = "big", .candidates = {}}},
      .lease = agent::Saved{}};
  const auto message = answer_message(saved);
  // A failed part's wire form keeps every field (docs/agent-protocol.md).
  const auto& taken = message.at("answer").at("runs").at(1);
  EXPECT_EQ(taken.at("failure").at("kind"), "rejected");
  EXPECT_TRUE(taken.at("commit").is_null());
  EXPECT_TRUE(taken.contains("left_out"));
  const auto reply = read_reply<agent::SavedAll>(read_output(wire(message)));
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->runs.size(), 3u);
  ASSERT_TRUE(reply->runs[0]);
  EXPECT_EQ(reply->runs[0]->commit, "abc");
  EXPECT_EQ(reply->runs[0]->left_out.named, left_out.named);
  EXPECT_EQ(reply->runs[0]->left_out.unnamed, 3u);
  EXPECT_TRUE(reply->runs[1].failed_with(Failure::rejected));
  EXPECT_TRUE(reply->runs[2].failed_with(Failure::over_limit));
  ASSERT_TRUE(reply->lease);
  EXPECT_TRUE(*reply->lease);
}

TEST(AgentProtocol, AFailureKeepsItsKindAndItsBranches) {
  const Error ambiguous{.kind = Failure::ambiguous,
                        .message = "'r1' has checkpoints from several pods",
                        .candidates = {"inflight/a/r1", "inflight/b/r1"}};
  const auto reply = read_reply<agent::Shown>(read_output(wire(failure_message(ambiguous))));
  EXPECT_FALSE(reply);
  EXPECT_EQ(reply.error().kind, Failure::ambiguous);
  EXPECT_EQ(reply.error().candidates.size(), 2u);
  EXPECT_EQ(reply.error().message, ambiguous.message);
}

TEST(AgentProtocol, ABranchStateTravelsAsItsWord) {
  for (const auto& [state, word] : agent::kBranchStates) {
    const OrderedJson json = state;
    EXPECT_EQ(json, word);
    EXPECT_EQ(json.get<agent::BranchState>(), state);
  }
  EXPECT_THROW(OrderedJson("Held").get<agent::BranchState>(), std::runtime_error);
}

// An output of this release's protocol: `{"version":N,` then `rest`.
std::string this_version(std::string_view rest) {
  return R"({"version":)" + std::to_string(kAgentProtocolVersion) + "," + std::string(rest);
}

TEST(AgentProtocol, AnUnknownFailureKindIsOther) {
  const auto out = read_output(
      this_version(R"("ok":false,"failure":{"kind":"bogus","error":"e","branches":[]}})"));
  EXPECT_FALSE(out);
  EXPECT_EQ(out.error().kind, Failure::other);
  EXPECT_EQ(out.error().message, "e");
}

// Whatever the agent printed that is not an answer of this release fails the
// step with a message that says what is wrong, and never throws.
TEST(AgentProtocol, AnythingButAnAnswerOfThisVersionIsAFailureThatSaysWhy) {
  const std::pair<std::string, std::string> cases[] = {
      {"", "gave no answer"},
      {"not json", "malformed"},
      {R"({"version":99,"ok":true,"answer":{}})", "protocol 99"},
      // An agent of the release before left-out entries were reported.
      {R"({"version":3,"ok":true,"answer":{"commit":null}})", "protocol 3"},
      {R"({"ok":true,"answer":{}})", "malformed"},
      {this_version(R"("ok":true})"), "malformed"},
      {std::string(70, '[') + std::string(70, ']'), "malformed"},
      // A float where a struct reads an integer: cast beyond its range, undefined behaviour.
      {R"({"version":1e117,"ok":true,"answer":{}})", "fractional number"},
      {this_version(R"("ok":true,"answer":{"lost":[],"left":[{"until":-1.5}]}})"),
       "fractional number"},
  };
  for (const auto& [output, says] : cases) {
    const auto out = read_output(output);
    EXPECT_FALSE(out) << output;
    EXPECT_EQ(out.error().kind, Failure::other) << output;
    EXPECT_NE(out.error().message.find(says), std::string::npos) << out.error().message;
  }
}

// A held run's params are a run-params.json as its branch holds it: a fraction there is judged
// when the params are read, and does not cost the rest of the answer.
TEST(AgentProtocol, AFractionInAHeldRunsParamsIsLeftToTheirReader) {
  const auto out = read_output(
      this_version(R"("ok":true,"answer":{"held":[{"params":{"version":1.5},"branch":"b",)"
                   R"("reason":"r"}]}})"));
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ((*out)["held"][0]["params"]["version"], 1.5);
}

TEST(AgentProtocol, AnAnswerThatLacksAFieldIsMalformed) {
  const auto reply =
      read_reply<agent::Saved>(read_output(this_version(R"("ok":true,"answer":{"commit":null}})")));
  EXPECT_FALSE(reply);
  EXPECT_NE(reply.error().message.find("malformed"), std::string::npos) << reply.error().message;
}

}  // namespace
}  // namespace inflight
