// The index entry codec: what a finished run's entry says, and what a
// hostile index file cannot make a listing believe.
#include "inflight/checkpoint/index_entry.hpp"

#include <gtest/gtest.h>

namespace inflight::checkpoint {
namespace {

RunParams finished_run() {
  RunParams params;
  params.run_id = "r1";
  params.origin_pod = "pod-a";
  params.created_at = "2026-11-26T01:00:00Z";
  params.final_status = "succeeded";
  params.attempts = {{.attempt = 1,
                      .pod = "pod-a",
                      .started_at = "2026-11-26T01:00:01Z",
                      .ended_at = "2026-11-26T01:05:00Z",
                      .outcome = "interrupted"},
                     {.attempt = 2,
                      .pod = "pod-b",
                      .started_at = "2026-11-26T01:06:00Z",
                      .ended_at = "2026-11-26T01:09:00Z",
                      .outcome = "succeeded"}};
  return params;
}

TEST(IndexEntry, AFinishedRunsEntryReadsBackAsWritten) {
  const auto text = write_index_entry(index_entry_of(finished_run(), 42, 100));
  const auto entry = parse_index_entry(text);
  ASSERT_TRUE(entry) << entry.error().message;
  EXPECT_EQ(entry->id, "r1");
  EXPECT_EQ(entry->final_status, "succeeded");
  EXPECT_EQ(entry->pod, "pod-b");
  ASSERT_EQ(entry->attempts.size(), 2u);
  EXPECT_EQ(entry->attempts[0].outcome, "interrupted");
  EXPECT_EQ(entry->records, 42u);
  EXPECT_EQ(entry->total, 100u);
  EXPECT_EQ(entry->finished_at, "2026-11-26T01:09:00Z");
  EXPECT_EQ(entry->result, "refs/inflight-results/r1");
}

TEST(IndexEntry, AHostileFileIsRefusedNamingTheField) {
  auto json =
      nlohmann::ordered_json::parse(write_index_entry(index_entry_of(finished_run(), 1, {})));
  const auto refusal = [&](const char* key, nlohmann::ordered_json value) {
    auto bad = json;
    bad[key] = std::move(value);
    const auto entry = parse_index_entry(bad.dump());
    return entry ? std::string("accepted") : entry.error().message;
  };
  EXPECT_NE(refusal("id", "../../etc").find("id"), std::string::npos);
  EXPECT_NE(refusal("result", "refs/heads/main").find("result"), std::string::npos);
  EXPECT_NE(refusal("records", -1).find("records"), std::string::npos);
  EXPECT_NE(refusal("pod", std::string(300, 'p')).find("pod"), std::string::npos);
  EXPECT_NE(refusal("attempts", nlohmann::ordered_json::array({1})).find("attempts"),
            std::string::npos);
  EXPECT_FALSE(parse_index_entry(std::string(kMaxIndexEntryBytes + 1, ' ')));
  EXPECT_FALSE(parse_index_entry("[]"));
}

}  // namespace
}  // namespace inflight::checkpoint
