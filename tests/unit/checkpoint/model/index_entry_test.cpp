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

TEST(IndexEntry, ALineHoldsTheWholeEntryAndItsResultCommit) {
  auto entry = index_entry_of(finished_run(), 42, 100);
  entry.result_commit = std::string(40, 'a');
  const auto line = write_index_line(entry);
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  const auto parsed = parse_index_line(line, Removals::refused);
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->id, "r1");
  ASSERT_TRUE(parsed->entry.has_value());
  EXPECT_EQ(write_index_line(*parsed->entry), line);
  // Layout 1's file of the same run reads the same, and a file without the commit still reads.
  EXPECT_EQ(parse_index_entry(write_index_entry(entry))->result_commit, entry.result_commit);
  EXPECT_EQ(
      parse_index_entry(write_index_entry(index_entry_of(finished_run(), 1, {})))->result_commit,
      std::nullopt);
}

TEST(IndexEntry, ARemovalIsALineOfTheLogOnly) {
  const auto line = write_removal_line("r1");
  EXPECT_EQ(line, "{\"id\":\"r1\",\"removed\":true}\n");
  const auto removal = parse_index_line(line, Removals::allowed);
  ASSERT_TRUE(removal) << removal.error().message;
  EXPECT_EQ(removal->id, "r1");
  EXPECT_FALSE(removal->entry.has_value());
  EXPECT_THROW(write_removal_line("../x"), std::invalid_argument);
  const auto refused = parse_index_line(line, Removals::refused);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("removal"), std::string::npos);
}

TEST(IndexEntry, AHostileLineIsRefusedNamingWhatIsWrong) {
  const auto refusal = [](std::string_view line) {
    const auto parsed = parse_index_line(line, Removals::allowed);
    return parsed ? std::string("accepted") : parsed.error().message;
  };
  auto entry = index_entry_of(finished_run(), 1, {});
  entry.result_commit = std::string(40, 'A');
  EXPECT_NE(refusal(write_index_line(entry)).find("result_commit"), std::string::npos);
  entry.result_commit = std::string(39, 'a');
  EXPECT_NE(refusal(write_index_line(entry)).find("result_commit"), std::string::npos);
  for (const auto* bad : {R"({"id":"r1","removed":false})", R"({"id":"../x","removed":true})",
                          R"({"id":"r1","removed":true,"pod":"p"})", R"({"removed":true})"})
    EXPECT_NE(refusal(bad).find("removal"), std::string::npos) << bad;
  EXPECT_NE(refusal("{\"id\":\"r1\",\n\"removed\":true}").find("newline"), std::string::npos);
  EXPECT_NE(refusal("[]").find("not an object"), std::string::npos);
  EXPECT_NE(refusal(std::string(kMaxIndexEntryBytes + 1, ' ')), "accepted");
}

}  // namespace
}  // namespace inflight::checkpoint
