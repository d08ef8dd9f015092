// Layout 2's index read: the snapshot's buckets, then the log's deltas in
// order, the last line of an id winning; and what a hostile snapshot or log
// cannot make a listing believe.
#include "store/runs_index.hpp"

#include <gtest/gtest.h>

#include "checkpoint/checkpoint_test_support.hpp"
#include "inflight/core/branch_name.hpp"

namespace inflight::checkpoint::testing {
namespace {

IndexEntry entry(const std::string& id, std::uint64_t records) {
  RunParams params;
  params.run_id = id;
  params.origin_pod = "pod-a";
  params.created_at = "2026-11-29T01:00:00Z";
  params.final_status = "succeeded";
  return index_entry_of(params, records, records);
}

std::string line(const std::string& id, std::uint64_t records) {
  return write_index_line(entry(id, records));
}

// One fast-import file command.
std::string file(const std::string& path, const std::string& content) {
  return "M 644 inline " + path + "\ndata " + std::to_string(content.size()) + "\n" + content +
         "\n";
}

class RunsIndexTest : public CheckpointTest {
 protected:
  void SetUp() override { run("git init -q --bare '" + cache_path().string() + "'"); }
  // A commit on `ref` with `files` (fast-import file commands), on the ref's tip unless `root`.
  std::string commit(const std::string& ref, const std::string& files, bool root = false) {
    const bool exists = !git(cache_path(), "for-each-ref " + ref).empty();
    const std::string stream = "commit " + ref +
                               "\ncommitter t <t@t> 1700000000 +0000\ndata 2\nc\n" +
                               (exists && !root ? "from " + ref + "^0\n" : "") +
                               (root ? "deleteall\n" : "") + files + "\n";
    write_file(temp_.path() / "stream", stream);
    git(cache_path(), "fast-import --quiet --force < '" + (temp_.path() / "stream").string() + "'");
    return trimmed(git(cache_path(), "rev-parse " + ref));
  }
  std::string layout() { return file("layout", std::string(kRunsLayout)); }
  std::string segment(const std::string& id, const std::string& name, const std::string& text) {
    return file("b/" + runs_bucket(id) + "/" + name, text);
  }
  RunsIndex read(const std::optional<std::string>& snapshot,
                 const std::optional<std::string>& log) {
    CacheRepo cache(cache_path());
    return read_runs_index(cache, snapshot, log);
  }
};

TEST_F(RunsIndexTest, TheLogsLinesGoOntoTheSnapshotInOrder) {
  const auto snapshot =
      commit(std::string(kRunsRef), layout() + segment("r-1", "000001.jsonl", line("r-1", 1)) +
                                        segment("r-2", "000001.jsonl", line("r-2", 2)));
  commit(std::string(kRunsLogRef), layout(), true);
  commit(std::string(kRunsLogRef), file("entries.jsonl", line("r-3", 3) + line("r-1", 9)));
  const auto log =
      commit(std::string(kRunsLogRef),
             file("entries.jsonl", write_removal_line("r-2") + line("r-4", 4) + line("r-3", 33)));
  const auto index = read(snapshot, log);
  EXPECT_TRUE(index.problems.empty()) << index.problems.front();
  ASSERT_EQ(index.entries.size(), 3u);
  EXPECT_EQ(index.entries.at("r-1").records, 9u);
  EXPECT_EQ(index.entries.at("r-3").records, 33u);  // the later delta's
  EXPECT_EQ(index.entries.at("r-4").records, 4u);
  EXPECT_FALSE(index.entries.contains("r-2"));
}

TEST_F(RunsIndexTest, ALaterSegmentOfABucketWins) {
  ASSERT_EQ(runs_bucket("r-1"), "3b");
  const auto snapshot =
      commit(std::string(kRunsRef), layout() + segment("r-1", "000001.jsonl", line("r-1", 1)) +
                                        segment("r-1", "000002.jsonl", line("r-1", 2)));
  EXPECT_EQ(read(snapshot, std::nullopt).entries.at("r-1").records, 2u);
}

TEST_F(RunsIndexTest, HostileLinesAndFilesAreLeftOutNamingWhereTheyAre) {
  // r-5 sits in r-1's bucket; a snapshot holds no removal; a line is not JSON;
  // a bucket is named wrongly.
  const auto other_bucket = runs_bucket("r-5") == runs_bucket("r-1") ? "r-6" : "r-5";
  const auto snapshot = commit(
      std::string(kRunsRef),
      layout() +
          segment("r-1", "000001.jsonl",
                  line("r-1", 1) + line(other_bucket, 5) + write_removal_line("r-1") + "{oops\n") +
          file("b/zz/000001.jsonl", line("r-7", 7)));
  const auto index = read(snapshot, std::nullopt);
  ASSERT_EQ(index.entries.size(), 1u);
  EXPECT_EQ(index.entries.at("r-1").records, 1u);
  ASSERT_EQ(index.problems.size(), 4u);
  const auto said = [&](const std::string& words) {
    return std::any_of(index.problems.begin(), index.problems.end(),
                       [&](const std::string& p) { return p.find(words) != std::string::npos; });
  };
  EXPECT_TRUE(said("line 2: run " + std::string(other_bucket) + " belongs in bucket"));
  EXPECT_TRUE(said("line 3: index line: a removal where none is allowed"));
  EXPECT_TRUE(said("line 4: index line:"));
  EXPECT_TRUE(said("b/zz: not a bucket"));
}

TEST_F(RunsIndexTest, FilesPastTheirLimitsAreNotRead) {
  std::string many;
  for (std::size_t i = 0; i <= kMaxIndexFileLines; ++i) many += line("r-1", i);
  std::string segments = layout() + segment("r-1", "000001.jsonl", many);
  for (int i = 0; i <= static_cast<int>(kMaxSegmentsPerBucket); ++i)
    segments += segment("r-2", std::to_string(100000 + i) + ".jsonl", line("r-2", 2));
  const auto index = read(commit(std::string(kRunsRef), segments), std::nullopt);
  EXPECT_EQ(index.entries.at("r-1").records, kMaxIndexFileLines - 1);  // the lines before the limit
  EXPECT_FALSE(index.entries.contains("r-2"));
  EXPECT_EQ(index.problems.size(), 2u);
}

TEST_F(RunsIndexTest, ARefWithoutItsLayoutIsNotRead) {
  const auto snapshot =
      commit(std::string(kRunsRef), segment("r-1", "000001.jsonl", line("r-1", 1)));
  commit(std::string(kRunsLogRef), file("layout", "inflight-runs 3\n"), true);
  const auto log = commit(std::string(kRunsLogRef), file("entries.jsonl", line("r-2", 2)));
  const auto index = read(snapshot, log);
  EXPECT_TRUE(index.entries.empty());
  ASSERT_EQ(index.problems.size(), 2u);
  EXPECT_NE(index.problems[0].find("inflight-runs: no layout file"), std::string::npos);
  EXPECT_NE(index.problems[1].find("inflight-runs-log: no layout file"), std::string::npos);
}

// A publish adds its lines to the server's log as a delta on the tip there, which the pod never
// downloads (here the fixture's "cache" is the server, and a pod's cache pushes to it).
TEST_F(RunsIndexTest, ADeltaGoesOnTheServersLogWithoutDownloadingIt) {
  commit(std::string(kRunsLogRef), layout(), true);
  const auto before = commit(std::string(kRunsLogRef), file("entries.jsonl", line("r-1", 1)));
  CacheRepo pod(temp_.path() / "pod-cache.git");
  RemoteStore store(pod, RemoteConfig{cache_path().string(), "", "", {}, {}, {}});
  const auto results = store.update({runs_log_delta(line("r-2", 2) + write_removal_line("r-1"))});
  ASSERT_EQ(results[0].outcome, RefOutcome::updated) << results[0].detail;
  const auto tip = trimmed(git(cache_path(), "rev-parse " + std::string(kRunsLogRef)));
  EXPECT_EQ(trimmed(git(cache_path(), "rev-parse " + tip + "^")), before);
  EXPECT_FALSE(pod.contains(before));
  run("git -C '" + cache_path().string() + "' fsck --strict --no-dangling");
  auto index = read(std::nullopt, tip);
  EXPECT_TRUE(index.problems.empty()) << index.problems.front();
  ASSERT_EQ(index.entries.size(), 1u);
  EXPECT_EQ(index.entries.at("r-2").records, 2u);

  // A log someone deleted starts again from a root of the pod's own.
  git(cache_path(), "update-ref -d " + std::string(kRunsLogRef));
  ASSERT_EQ(store.update({runs_log_delta(line("r-3", 3))})[0].outcome, RefOutcome::updated);
  const auto again = trimmed(git(cache_path(), "rev-parse " + std::string(kRunsLogRef)));
  EXPECT_EQ(trimmed(git(cache_path(), "rev-list --count " + again)), "2");
  index = read(std::nullopt, again);
  EXPECT_TRUE(index.problems.empty()) << index.problems.front();
  EXPECT_EQ(index.entries.size(), 1u);
  EXPECT_TRUE(index.entries.contains("r-3"));

  EXPECT_THROW(runs_log_delta("no newline"), std::invalid_argument);
  EXPECT_THROW(runs_log_delta(""), std::invalid_argument);
}

// More lines than a reader takes from one file go as a chain of deltas in one push.
TEST_F(RunsIndexTest, ManyLinesGoAsAChainOfDeltasEachWithinItsLimits) {
  commit(std::string(kRunsLogRef), layout(), true);
  std::string lines;
  for (std::size_t i = 0; i < kMaxIndexFileLines + 10; ++i)
    lines += line("r-" + std::to_string(i), i);
  CacheRepo pod(temp_.path() / "pod-cache.git");
  RemoteStore store(pod, RemoteConfig{cache_path().string(), "", "", {}, {}, {}});
  ASSERT_EQ(store.update({runs_log_delta(lines)})[0].outcome, RefOutcome::updated);
  const auto tip = trimmed(git(cache_path(), "rev-parse " + std::string(kRunsLogRef)));
  EXPECT_EQ(trimmed(git(cache_path(), "rev-list --count " + tip)), "3");  // the root, two deltas
  const auto index = read(std::nullopt, tip);
  EXPECT_TRUE(index.problems.empty()) << index.problems.front();
  EXPECT_EQ(index.entries.size(), kMaxIndexFileLines + 10);
}

}  // namespace
}  // namespace inflight::checkpoint::testing
