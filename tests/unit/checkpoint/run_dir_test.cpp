#include "inflight/checkpoint/run_dir.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "inflight/checkpoint/run_params.hpp"
#include "temp_dir.hpp"

namespace inflight::checkpoint {
namespace {

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(RepairTornLine, DropsOnlyAnUnterminatedLastLine) {
  TempDir dir;
  const auto file = dir.path() / "index.jsonl";
  write(file, "{\"a\":1}\n{\"b\":2}\n{\"c\":");
  EXPECT_EQ(repair_torn_line(file), 5u);
  EXPECT_EQ(read(file), "{\"a\":1}\n{\"b\":2}\n");
  EXPECT_EQ(repair_torn_line(file), 0u);
  EXPECT_EQ(read(file), "{\"a\":1}\n{\"b\":2}\n");
}

TEST(RepairTornLine, HandlesAFileWithNoNewlineAndAMissingFile) {
  TempDir dir;
  const auto file = dir.path() / "index.jsonl";
  EXPECT_EQ(repair_torn_line(file), 0u);
  write(file, std::string(10000, 'x'));
  EXPECT_EQ(repair_torn_line(file), 10000u);
  EXPECT_EQ(read(file), "");
}

TEST(RecordCounter, CountsCompleteLinesIncrementally) {
  TempDir dir;
  const auto file = dir.path() / "index.jsonl";
  RecordCounter counter;
  EXPECT_EQ(counter.count(file), 0u);
  write(file, "a\nb\nc");
  EXPECT_EQ(counter.count(file), 2u);
  std::ofstream(file, std::ios::app) << "\nd\n";
  EXPECT_EQ(counter.count(file), 4u);
  write(file, "x\n");  // rewritten shorter
  EXPECT_EQ(counter.count(file), 1u);
}

// A periodic tick skips the push when this is unchanged, so it must change
// with every write a checkpoint would carry and stay put otherwise.
TEST(StatSignature, ChangesWithContentNotWithReads) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "sub");
  write(dir.path() / "index.jsonl", "a\n");
  write(dir.path() / "sub" / "result.json", "{}");
  const auto first = stat_signature(dir.path());
  EXPECT_EQ(read(dir.path() / "index.jsonl"), "a\n");
  EXPECT_EQ(stat_signature(dir.path()), first);

  std::ofstream(dir.path() / "index.jsonl", std::ios::app) << "b\n";
  const auto appended = stat_signature(dir.path());
  EXPECT_NE(appended, first);
  write(dir.path() / "sub" / "new.json", "{}");
  const auto added = stat_signature(dir.path());
  EXPECT_NE(added, appended);
  std::filesystem::remove(dir.path() / "sub" / "new.json");
  EXPECT_NE(stat_signature(dir.path()), added);
}

TEST(RunParams, RoundTripsThroughTheRunDir) {
  TempDir dir;
  RunParams params;
  params.run_id = "r-1";
  params.request = {{"suite_filter", "evals/a.yaml"}, {"workers", 2}};
  params.child = {{"argv", {"agentv", "{suite_filter}"}}, {"resume_argv", {"--resume"}}};
  params.argv = {"agentv", "evals/a.yaml"};
  params.cwd = "/srv";
  params.origin_pod = "pod-a";
  params.created_at = "2026-11-21T10:15:00Z";
  params.attempts.push_back({1, "pod-a", "2026-11-21T10:15:01Z", "2026-11-21T10:16:00Z", 143,
                             std::nullopt, "interrupted"});
  params.attempts.push_back({2, "pod-b", "2026-11-21T10:17:00Z", {}, {}, {}, {}});
  write_run_params(dir.path(), params);

  const auto back = read_run_params(dir.path());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(to_json(*back), to_json(params));
  EXPECT_EQ(back->attempts[0].exit_code, 143);
  EXPECT_FALSE(back->attempts[1].outcome.has_value());
  // Declaration order of the template is kept (optional groups depend on it).
  EXPECT_EQ(back->child.begin().key(), "argv");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / ".run-params.json.tmp"));
}

TEST(RunParams, MalformedFileNamesTheProblem) {
  TempDir dir;
  write(dir.path() / kRunParamsFile, "{\"version\":1}");
  try {
    read_run_params(dir.path());
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("run-params.json"), std::string::npos);
  }
  EXPECT_FALSE(read_run_params(dir.path() / "missing").has_value());
}

}  // namespace
}  // namespace inflight::checkpoint
