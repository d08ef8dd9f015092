#include "inflight/checkpoint/branch_listing.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "checkpoint/checkpoint_test_support.hpp"
#include "inflight/checkpoint/checkpoint_store.hpp"

namespace inflight::checkpoint::testing {
namespace {

class BranchListingTest : public CheckpointTest {
 protected:
  BranchListingTest() : cache_(temp_.path() / "reader-cache.git") {
    git(temp_.path(), "init -q --bare results.git");
  }

  fs::path remote_path() const { return temp_.path() / "results.git"; }
  RemoteConfig remote_config() const { return {remote_path().string(), "", "", {}, {}, {}}; }

  // A run dir with `attempts` interrupted attempts, checkpointed by `pod`.
  fs::path save_run(const std::string& pod, const std::string& id, int attempts,
                    std::uint64_t records) {
    const auto dir = temp_.path() / "runs" / id;
    fs::create_directories(dir);
    RunParams params;
    params.run_id = id;
    params.child = {{"argv", {"x"}}, {"progress_file", "index.jsonl"}};
    params.origin_pod = pod;
    params.created_at = "2026-11-21T10:00:00Z";
    for (int n = 1; n <= attempts; ++n)
      params.attempts.push_back({.attempt = n,
                                 .pod = pod,
                                 .started_at = "t",
                                 .ended_at = "t",
                                 .exit_code = 143,
                                 .outcome = "interrupted"});
    write_run_params(dir, params);
    write_file(dir / "index.jsonl", std::string(records, '\n'));
    StoreConfig config{temp_.path() / "writer-cache.git", remote_config(), {}, 1 << 20};
    CheckpointStore(config).save(dir, pod,
                                 {id, attempts, CheckpointReason::shutdown, pod, records});
    return dir;
  }

  static std::uint64_t bytes_under(const fs::path& dir) {
    std::uint64_t total = 0;
    for (const auto& entry : fs::recursive_directory_iterator(dir))
      if (entry.is_regular_file()) total += entry.file_size();
    return total;
  }

  static std::int64_t now() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  // A commit with one file and a foreign message, pushed straight to `ref`.
  void craft_branch(const std::string& ref) {
    const auto blob =
        trimmed(run("printf x | git -C " + remote_path().string() + " hash-object -w --stdin"));
    const auto tree = trimmed(run("printf '100644 blob " + blob + "\\tnotes.txt\\n' | git -C " +
                                  remote_path().string() + " mktree"));
    git(remote_path(), "update-ref " + ref + " " +
                           trimmed(git(remote_path(), "commit-tree " + tree + " -m crafted")));
  }

  CacheRepo cache_;
  RemoteStore remote() { return RemoteStore(cache_, remote_config()); }
};

TEST(DescribeCommitTest, ReadsTheSubjectAndTheTrailers) {
  const auto commit =
      describe_commit({"abc", 1700000000,
                       "inflight checkpoint r1 attempt 2 (claim)\n\nInflight-Pod: pod-b\n"
                       "Inflight-Attempt: 3\nInflight-Records: 17\n"});
  EXPECT_EQ(commit.oid, "abc");
  EXPECT_EQ(commit.time, 1700000000);
  EXPECT_EQ(commit.reason, CheckpointReason::claim);
  EXPECT_EQ(commit.attempt, 3);  // the trailer wins over the subject
  EXPECT_EQ(commit.pod, "pod-b");
  EXPECT_EQ(commit.records, 17u);
}

TEST(DescribeCommitTest, AForeignMessageLeavesTheDefaults) {
  const auto commit = describe_commit({"abc", 5, "crafted\n\nInflight-Records: many\n"});
  EXPECT_EQ(commit.reason, std::nullopt);
  EXPECT_EQ(commit.attempt, 0);
  EXPECT_EQ(commit.pod, "");
  EXPECT_EQ(commit.records, 0u);
}

TEST(BranchNameTest, ParsesAndMatchesRunIdsShortAndFullBranchNames) {
  const auto name = parse_branch_ref("refs/heads/inflight/pod-a/r-1");
  ASSERT_TRUE(name.has_value());
  EXPECT_EQ(name->pod, "pod-a");
  EXPECT_EQ(name->run_id, "r-1");
  EXPECT_FALSE(parse_branch_ref("refs/heads/inflight/r-1").has_value());
  EXPECT_FALSE(parse_branch_ref("refs/heads/main").has_value());
  for (const auto* id : {"r-1", "inflight/pod-a/r-1", "refs/heads/inflight/pod-a/r-1"})
    EXPECT_TRUE(branch_matches("refs/heads/inflight/pod-a/r-1", id)) << id;
  EXPECT_FALSE(branch_matches("refs/heads/inflight/pod-a/r-1", "r-"));
  EXPECT_FALSE(branch_matches("refs/heads/inflight/pod-a/r-1", "pod-a"));
}

TEST_F(BranchListingTest, SizeCountsEveryFileOnceWhetherChunkedOrNot) {
  write_file(run_dir() / "small.txt", "hello");
  write_file(run_dir() / "copy.txt", "hello");  // same blob, still a second file
  write_file(run_dir() / "sub" / "big.bin", std::string(200 * 1024 + 7, 'b'));  // chunked
  const auto commit = RunSnapshotter(cache_, {})
                          .snapshot(run_dir(), {"r", 1, CheckpointReason::manual, "p", 0}, {});
  ASSERT_TRUE(commit.has_value());
  EXPECT_EQ(run_dir_size(cache_, *commit), 5u + 5u + 200 * 1024 + 7);
}

TEST_F(BranchListingTest, ListSummarisesEveryBranchAndFiltersByPod) {
  const auto dir = save_run("pod-a", "r1", 2, 4);
  save_run("pod-b", "r2", 1, 9);
  auto store = remote();
  const auto listing = list_branches(cache_, store);
  EXPECT_TRUE(listing.problems.empty());
  ASSERT_EQ(listing.branches.size(), 2u);
  const auto& r1 = listing.branches[0];
  EXPECT_EQ(r1.ref, "refs/heads/inflight/pod-a/r1");
  EXPECT_EQ(r1.name.run_id, "r1");
  EXPECT_EQ(r1.attempts, 2u);
  EXPECT_EQ(r1.tip.records, 4u);
  EXPECT_EQ(r1.tip.reason, CheckpointReason::shutdown);
  EXPECT_EQ(r1.tip.oid, trimmed(git(remote_path(), "rev-parse " + r1.ref)));
  EXPECT_NEAR(static_cast<double>(r1.tip.time), static_cast<double>(now()), 60);
  EXPECT_EQ(r1.size_bytes, bytes_under(dir));
  ASSERT_TRUE(r1.run_params.has_value());
  EXPECT_EQ(r1.run_params->at("run_id"), "r1");
  EXPECT_EQ(listing.branches[1].tip.records, 9u);

  const auto only_b = list_branches(cache_, store, "pod-b");
  ASSERT_EQ(only_b.branches.size(), 1u);
  EXPECT_EQ(only_b.branches[0].name.run_id, "r2");
}

TEST_F(BranchListingTest, ForeignBranchesAreListedAsFarAsTheyCanBeRead) {
  save_run("pod-a", "r1", 1, 2);
  craft_branch("refs/heads/inflight/pod-x/bare");
  craft_branch("refs/heads/inflight/no-pod");
  auto store = remote();
  const auto listing = list_branches(cache_, store);
  ASSERT_EQ(listing.branches.size(), 2u);
  const auto found = std::find_if(listing.branches.begin(), listing.branches.end(),
                                  [](const auto& b) { return b.name.pod == "pod-x"; });
  ASSERT_NE(found, listing.branches.end());
  const auto& bare = *found;
  EXPECT_EQ(bare.name.run_id, "bare");
  EXPECT_FALSE(bare.run_params.has_value());
  EXPECT_EQ(bare.attempts, 0u);
  EXPECT_EQ(bare.size_bytes, 1u);
  ASSERT_EQ(listing.problems.size(), 1u);
  EXPECT_NE(listing.problems[0].find("inflight/no-pod"), std::string::npos);
}

TEST_F(BranchListingTest, FindRunBranchesSearchesEveryPod) {
  save_run("pod-a", "r1", 1, 2);
  save_run("pod-b", "r1", 1, 2);
  save_run("pod-b", "r2", 1, 2);
  auto store = remote();
  EXPECT_EQ(find_run_branches(store, "r1").size(), 2u);
  const auto one = find_run_branches(store, "inflight/pod-b/r1");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].ref, "refs/heads/inflight/pod-b/r1");
  EXPECT_TRUE(find_run_branches(store, "r3").empty());
}

TEST_F(BranchListingTest, PruneByRunIdReportsIdsWithoutABranch) {
  save_run("pod-a", "r1", 1, 2);
  save_run("pod-a", "r2", 1, 2);
  auto store = remote();
  const auto plan = plan_prune(cache_, store, {std::nullopt, {"r2", "r9"}, false}, now());
  EXPECT_EQ(plan.refs, std::vector<std::string>{"refs/heads/inflight/pod-a/r2"});
  EXPECT_EQ(plan.missing_run_ids, std::vector<std::string>{"r9"});
}

TEST_F(BranchListingTest, PruneByAgeUsesTheLastCheckpoint) {
  save_run("pod-a", "r1", 1, 2);
  auto store = remote();
  const auto tip_time = list_branches(cache_, store).branches.at(0).tip.time;
  EXPECT_EQ(plan_prune(cache_, store, {100, {}, false}, tip_time + 99).refs.size(), 0u);
  EXPECT_EQ(plan_prune(cache_, store, {100, {}, false}, tip_time + 100).refs.size(), 1u);
}

TEST_F(BranchListingTest, PruneAllTakesEveryInflightBranchEvenForeignOnes) {
  save_run("pod-a", "r1", 1, 2);
  craft_branch("refs/heads/inflight/no-pod");
  craft_branch("refs/heads/main");
  auto store = remote();
  const auto plan = plan_prune(cache_, store, {std::nullopt, {}, true}, now());
  EXPECT_EQ(plan.refs, (std::vector<std::string>{"refs/heads/inflight/no-pod",
                                                 "refs/heads/inflight/pod-a/r1"}));
}

}  // namespace
}  // namespace inflight::checkpoint::testing
