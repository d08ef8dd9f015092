#include "inflight/checkpoint/checkpoint_store.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <sstream>
#include <thread>

#include "checkpoint/background_process.hpp"
#include "checkpoint/checkpoint_test_support.hpp"
#include "git/markers.hpp"
#include "git/oid_text.hpp"
#include "inflight/checkpoint/index_entry.hpp"
#include "inflight/checkpoint/lease.hpp"
#include "inflight/checkpoint/run_listing.hpp"
#include "inflight/core/branch_name.hpp"
#include "inflight/core/run_params.hpp"
#include "store/archive_fold.hpp"

namespace inflight::checkpoint::testing {
namespace {

class CheckpointStoreTest : public CheckpointTest {
 protected:
  static Result<void> release_one(CheckpointStore&& store, const fs::path& dir,
                                  const std::string& pod, const CheckpointInfo& info) {
    return release_one(store, dir, pod, info);
  }
  static Result<void> release_one(CheckpointStore& store, const fs::path& dir,
                                  const std::string& pod, const CheckpointInfo& info) {
    return store.release({{.run_dir = dir, .origin_pod = pod, .info = info}}).front();
  }

  fs::path remote() const { return temp_.path() / "results.git"; }

  StoreConfig config(const std::string& name) const {
    return {.cache_dir = temp_.path() / (name + "-cache.git"),
            .remote = {remote().string(), "", "", {}, {}, {}},
            .exclude_globs = {},
            .restore_limits = {.max_bytes = 1 << 20, .max_files = 1000},
            .claim_lease = std::chrono::seconds(120)};
  }
  // A store that starts a results repo with no published run in layout 1, as earlier releases
  // did (--results-layout 1).
  StoreConfig layout_one(const std::string& name) const {
    auto one = config(name);
    one.results_layout = 1;
    return one;
  }

  // Every run acceptable, as an instance with its template configured judges.
  static RunVerdict accept(const RunParams&) {
    return {.refusal = std::nullopt, .progress_file = "index.jsonl"};
  }

  // A restore of every run, by `pod`, judged acceptable.
  static RestoreRequest request(const fs::path& runs, const std::string& pod) {
    return {.runs_dir = runs,
            .pod = pod,
            .local = {},
            .judge = accept,
            .only = std::nullopt,
            .lease_until = std::nullopt,
            .skip = {}};
  }

  static RestoreReport restore(CheckpointStore&& store, const fs::path& runs,
                               const std::string& pod, std::map<std::string, LocalRun> local = {},
                               RunJudge judge = accept, std::set<std::string> skip = {}) {
    return store.restore({.runs_dir = runs,
                          .pod = pod,
                          .local = std::move(local),
                          .judge = std::move(judge),
                          .only = std::nullopt,
                          .lease_until = std::nullopt,
                          .skip = std::move(skip)});
  }

  static std::int64_t now_plus(std::int64_t seconds) {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
               .count() +
           seconds;
  }

  // pod-a's run r1 with a periodic tip, and pod-a's lease until `until`.
  fs::path running_run_with_lease(std::int64_t until) {
    const auto dir = make_run(temp_.path() / "runs-a", "r1", 1);
    CheckpointStore store(config("a"));
    store.save(dir, "pod-a", info("r1", CheckpointReason::periodic));
    hold_lease(store.cache(), store.remote(), {.pod = "pod-a", .until = until});
    store.persist();  // as the agent does after each op
    return dir;
  }

  bool has_ref(const std::string& ref) const {
    return !git(remote(), "for-each-ref " + ref).empty();
  }

  // The results repo keeps layout 2: its index is the log's root, made there as a migration
  // would (docs/design/history-layout.md §3.1).
  void start_runs_log() {
    if (!fs::exists(remote())) run("git init -q --bare '" + remote().string() + "'");
    write_file(temp_.path() / "log.stream",
               "commit " + std::string(kRunsLogRef) +
                   "\ncommitter t <t@t> 1700000000 +0000\ndata 4\nlog\nM 644 inline layout\n"
                   "data 16\ninflight-runs 2\n\n");
    git(remote(), "fast-import --quiet < '" + (temp_.path() / "log.stream").string() + "'");
  }
  // Layout 2, and pod-a's run r1 released through `store`: r1's result commit.
  std::string r1_released_on_layout_two(CheckpointStore& store) {
    start_runs_log();
    EXPECT_TRUE(release_one(store, finished_run(temp_.path() / "runs-a", "r1", "succeeded"),
                            "pod-a", info("r1", CheckpointReason::final)));
    return trimmed(git(remote(), "rev-parse refs/inflight-results/r1"));
  }
  // The log's entries, its deltas read oldest first, the last line of an id winning.
  std::map<std::string, IndexEntry> logged() const {
    std::map<std::string, IndexEntry> entries;
    std::istringstream commits(git(remote(), "rev-list --reverse " + std::string(kRunsLogRef)));
    std::string commit;
    std::getline(commits, commit);  // the root
    while (std::getline(commits, commit)) {
      std::istringstream lines(git(remote(), "show " + commit + ":entries.jsonl"));
      for (std::string line; std::getline(lines, line);) {
        auto parsed = parse_index_line(line, Removals::allowed);
        EXPECT_TRUE(parsed) << line;
        if (parsed && parsed->entry) entries.insert_or_assign(parsed->id, *parsed->entry);
        if (parsed && !parsed->entry) entries.erase(parsed->id);
      }
    }
    return entries;
  }

  // A run dir as serve leaves it after an interrupted attempt.
  fs::path make_run(const fs::path& runs, const std::string& id, int attempts) const {
    const auto dir = runs / id;
    fs::create_directories(dir);
    RunParams params;
    params.run_id = id;
    params.child = {{"argv", {"x"}}, {"progress_file", "index.jsonl"}};
    params.origin_pod = "pod-a";
    params.created_at = "2026-11-21T10:00:00Z";
    for (int n = 1; n <= attempts; ++n)
      params.attempts.push_back({.attempt = n,
                                 .pod = "pod-a",
                                 .started_at = "t",
                                 .ended_at = "t",
                                 .exit_code = 143,
                                 .outcome = "interrupted"});
    write_run_params(dir, params);
    write_file(dir / "index.jsonl", "{\"test_id\":\"t001\"}\n{\"test_id\":\"t002\"}\n");
    return dir;
  }

  fs::path finished_run(const fs::path& runs, const std::string& id,
                        const std::string& status) const {
    const auto dir = make_run(runs, id, 1);
    auto params = *read_run_params(dir);
    params.final_status = status;
    params.attempts.back().outcome = status;
    write_run_params(dir, params);
    return dir;
  }

  // pod-b's finished run `id`, as a release step takes it.
  SaveRequest pod_b_final(const fs::path& runs, const std::string& id,
                          const std::string& status) const {
    return {.run_dir = finished_run(runs, id, status),
            .origin_pod = "pod-b",
            .info = info(id, CheckpointReason::final)};
  }
  // pod-b's copy of run `taken`, another run dir than the one pod-a published (a third record).
  SaveRequest other_copy_of_taken(const fs::path& runs) const {
    auto taken = pod_b_final(runs, "taken", "failed");
    append_file(taken.run_dir / "index.jsonl", "{\"test_id\":\"t003\"}\n");
    return taken;
  }

  CheckpointInfo info(const std::string& id,
                      CheckpointReason reason = CheckpointReason::shutdown) const {
    return {id, 1, reason, "pod-a", 2};
  }
};

TEST_F(CheckpointStoreTest, SavePushesToTheRunBranchAndSkipsAnUnchangedDir) {
  CheckpointStore store(config("a"));
  const auto dir = make_run(temp_.path() / "runs", "r1", 1);
  const auto first = store.save(dir, "pod-a", info("r1")).value();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(trimmed(git(remote(), "rev-parse refs/heads/inflight/pod-a/r1")), *first);
  EXPECT_FALSE(store.save(dir, "pod-a", info("r1", CheckpointReason::periodic)).value());
  append_file(dir / "index.jsonl", "{\"test_id\":\"t003\"}\n");
  const auto second = store.save(dir, "pod-a", info("r1", CheckpointReason::periodic)).value();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(trimmed(git(remote(), "rev-parse refs/heads/inflight/pod-a/r1^")), *first);
}

// A shutdown's push keeps no objects in the cache and moves none of its
// refs: the next start on that disk restores from the branch as usual.
TEST_F(CheckpointStoreTest, ASaveThatKeptNoObjectsLeavesTheCacheAsItWas) {
  const auto dir = make_run(temp_.path() / "runs", "r1", 1);
  const auto shutdown = CheckpointStore(config("a")).save(dir, "pod-a", info("r1")).value();
  ASSERT_TRUE(shutdown);
  EXPECT_FALSE(CacheRepo(config("a").cache_dir).contains(*shutdown));
  EXPECT_EQ(git(config("a").cache_dir, "for-each-ref"), "");
  const auto runs_a2 = temp_.path() / "runs-a2";
  fs::create_directories(runs_a2);
  CheckpointStore next(config("a"));
  const auto report = restore(std::move(next), runs_a2, "pod-a");
  EXPECT_EQ(report.claimed.size(), 1u);
  EXPECT_TRUE(report.problems.empty()) << report.problems.front();
}

// Agents of one pod share the cache: what one holds in memory while it
// pushes must not break another's fetch (its negotiation offers every ref
// of the cache but tags).
TEST_F(CheckpointStoreTest, AnotherAgentFetchesWhileOneHoldsUnkeptCommits) {
  const auto dir = make_run(temp_.path() / "runs", "r1", 1);
  CheckpointStore pushing(config("a"));
  ASSERT_TRUE(pushing.save(dir, "pod-a", info("r1", CheckpointReason::periodic)).value());
  const auto runs_b = temp_.path() / "runs-b";
  fs::create_directories(runs_b);
  CheckpointStore fetching(config("a"));
  const auto listing =
      fetching.remote().list("refs/heads/inflight/", RemoteStore::Tips::downloaded);
  ASSERT_EQ(listing.size(), 1u);
  EXPECT_NO_THROW(fetching.remote().fetch(listing[0].ref));
  pushing.persist();
  EXPECT_EQ(pushing.remote().last_pushed(listing[0].ref), listing[0].oid);
}

// The steps of serve on one disk, one agent process each: a restore's
// claim, kept, then periodic saves on top of it.
TEST_F(CheckpointStoreTest, PeriodicSavesBuildOnAKeptClaim) {
  const auto dir = make_run(temp_.path() / "runs-a", "r1", 1);
  ASSERT_TRUE(CheckpointStore(config("a")).save(dir, "pod-a", info("r1")).value());
  const auto runs_b = temp_.path() / "runs-b";
  fs::create_directories(runs_b);
  {
    CheckpointStore store(config("b"));
    ASSERT_EQ(restore(std::move(store), runs_b, "pod-b").claimed.size(), 1u);
    store.persist();
  }
  for (int tick = 0; tick < 3; ++tick) {
    append_file(runs_b / "r1" / "index.jsonl",
                "{\"test_id\":\"t00" + std::to_string(tick) + "\"}\n");
    CheckpointStore store(config("b"));
    const auto report = store.save_all({{.run_dir = runs_b / "r1",
                                         .origin_pod = "pod-a",
                                         .info = info("r1", CheckpointReason::periodic)}},
                                       std::nullopt);
    ASSERT_FALSE(report.runs[0].error) << *report.runs[0].error;
    ASSERT_TRUE(report.runs[0].commit);
    store.persist();
  }
}

// Every claim rides in one push; each lands on its own.
TEST_F(CheckpointStoreTest, RestoreClaimsEveryRunInOnePush) {
  for (const auto* id : {"r1", "r2", "r3"})
    CheckpointStore(config("a"))
        .save(make_run(temp_.path() / "runs-a", id, 1), "pod-a",
              info(id, CheckpointReason::shutdown));
  const auto runs_b = temp_.path() / "runs-b";
  fs::create_directories(runs_b);
  const auto report = restore(CheckpointStore(config("b")), runs_b, "pod-b");
  EXPECT_TRUE(report.problems.empty()) << report.problems.front();
  ASSERT_EQ(report.claimed.size(), 3u);
  for (const auto& run : report.claimed) {
    EXPECT_TRUE(fs::exists(run.dir / "index.jsonl"));
    EXPECT_EQ(trimmed(git(remote(), "rev-parse " + run.branch)), run.claim);
  }
}

// A restore records each claim's tip for the next save in the cache's one
// packed-refs file, not a loose ref file per run (a directory entry each,
// costly on a slow disk).
TEST_F(CheckpointStoreTest, ClaimedTipsArePackedInOneFileForTheNextAgent) {
  for (const auto* id : {"r1", "r2"})
    CheckpointStore(config("a"))
        .save(make_run(temp_.path() / "runs-a", id, 1), "pod-a",
              info(id, CheckpointReason::shutdown));
  const auto runs_b = temp_.path() / "runs-b";
  fs::create_directories(runs_b);
  RestoreReport report;
  {
    CheckpointStore store(config("b"));
    report = restore(std::move(store), runs_b, "pod-b");
    store.persist();
  }
  ASSERT_EQ(report.claimed.size(), 2u);
  const auto cache = config("b").cache_dir;
  EXPECT_FALSE(fs::exists(cache / "refs" / "inflight-local"));
  EXPECT_EQ(trimmed(git(cache, "for-each-ref '--format=%(refname)' refs/inflight-local")),
            "refs/inflight-local/inflight/pod-a/r1\nrefs/inflight-local/inflight/pod-a/r2");
  CheckpointStore next(config("b"));
  for (const auto& run : report.claimed)
    EXPECT_EQ(next.remote().last_pushed(run.branch), run.claim);
}

// Between reading a branch and pushing the claims, another pod claimed the
// run, or its owner finished it and deleted the branch: the claim is lost,
// nothing is written over it or recreated, and nothing lands on disk.
TEST_F(CheckpointStoreTest, AClaimOnABranchThatMovedOrWentSinceItWasReadIsLost) {
  for (const std::string moved : {"claimed", "deleted"}) {
    const std::string id = "r-" + moved;
    CheckpointStore(config("a"))
        .save(make_run(temp_.path() / "runs-a", id, 1), "pod-a",
              info(id, CheckpointReason::shutdown));
    const auto ref = branch_ref({"pod-a", id});
    const auto runs_b = temp_.path() / ("runs-b-" + moved);
    const auto runs_c = temp_.path() / ("runs-c-" + moved);
    fs::create_directories(runs_b);
    fs::create_directories(runs_c);
    auto meanwhile = [&](const RunParams& params) {
      if (moved == "claimed")
        EXPECT_EQ(restore(CheckpointStore(config("c")), runs_c, "pod-c").claimed.size(), 1u);
      else
        git(remote(), "update-ref -d " + ref);
      return accept(params);
    };
    const auto report = restore(CheckpointStore(config("b")), runs_b, "pod-b", {}, meanwhile);
    const auto tip = git(remote(), "for-each-ref " + ref);
    EXPECT_TRUE(report.claimed.empty()) << moved;
    EXPECT_EQ(report.lost, std::vector<std::string>{id}) << moved;
    EXPECT_FALSE(fs::exists(runs_b / id)) << moved;
    EXPECT_FALSE(fs::exists(runs_b / (".restore-" + id))) << moved;
    if (moved == "deleted") {
      EXPECT_EQ(tip, "") << "a finished run's branch was recreated";
    } else {
      EXPECT_NE(git(remote(), "log -1 --format=%B " + ref).find("Inflight-Pod: pod-c\n"),
                std::string::npos)
          << "pod-c's claim was written over";
    }
  }
}

// A claim a local results repo could not write was judged by nobody: the
// run is not lost to another pod, and a later restore claims it.
TEST_F(CheckpointStoreTest, AClaimALocalResultsRepoCouldNotWriteIsNotLost) {
  CheckpointStore(config("a"))
      .save(make_run(temp_.path() / "runs-a", "r1", 1), "pod-a",
            info("r1", CheckpointReason::shutdown));
  const auto lock = remote() / (branch_ref({"pod-a", "r1"}) + ".lock");
  const auto runs_b = temp_.path() / "runs-b";
  fs::create_directories(runs_b);
  auto lock_meanwhile = [&](const RunParams& params) {
    write_file(lock, "");
    return accept(params);
  };
  const auto report = restore(CheckpointStore(config("b")), runs_b, "pod-b", {}, lock_meanwhile);
  EXPECT_TRUE(report.claimed.empty());
  EXPECT_TRUE(report.lost.empty());
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_NE(report.problems[0].find("could not write"), std::string::npos) << report.problems[0];
  EXPECT_FALSE(fs::exists(runs_b / "r1"));

  fs::remove(lock);
  EXPECT_EQ(restore(CheckpointStore(config("b")), runs_b, "pod-b").claimed.size(), 1u);
}

// The branch copies are written beside the run dirs before the push: a
// restore that fails after them (the results repo gone) leaves none behind.
TEST_F(CheckpointStoreTest, ARestoreThatFailsLeavesNoBranchCopyBehind) {
  for (const std::string id : {"r1", "r2"})
    CheckpointStore(config("a"))
        .save(make_run(temp_.path() / "runs-a", id, 1), "pod-a",
              info(id, CheckpointReason::shutdown));
  const auto runs_b = temp_.path() / "runs-b";
  fs::create_directories(runs_b);
  auto repo_gone_meanwhile = [&](const RunParams& params) {
    if (params.run_id == "r2") fs::rename(remote(), temp_.path() / "gone.git");
    return accept(params);
  };
  EXPECT_THROW(restore(CheckpointStore(config("b")), runs_b, "pod-b", {}, repo_gone_meanwhile),
               GitError);
  EXPECT_TRUE(fs::is_empty(runs_b));
}

TEST_F(CheckpointStoreTest, RestoreClaimsAndMaterialisesOnAnEmptyDisk) {
  const auto dir = make_run(temp_.path() / "runs-a", "r1", 1);
  CheckpointStore(config("a")).save(dir, "pod-a", info("r1"));

  CheckpointStore other(config("b"));
  const auto runs_b = temp_.path() / "runs-b";
  fs::create_directories(runs_b);
  const auto report = restore(std::move(other), runs_b, "pod-b");
  const auto& claimed = report.claimed;
  EXPECT_TRUE(report.problems.empty());
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].dir, runs_b / "r1");
  EXPECT_EQ(claimed[0].params.attempts.size(), 1u);
  EXPECT_EQ(read_file(runs_b / "r1" / "index.jsonl"), read_file(dir / "index.jsonl"));
  const auto message = git(remote(), "log -1 --format=%B refs/heads/inflight/pod-a/r1");
  EXPECT_NE(message.find("inflight checkpoint r1 attempt 1 (claim)"), std::string::npos);
  EXPECT_NE(message.find("Inflight-Pod: pod-b"), std::string::npos);
  EXPECT_FALSE(fs::exists(runs_b / ".restore-r1"));
  // The branch's copy won: the claim carries the tip's own tree.
  const std::string ref = "refs/heads/inflight/pod-a/r1";
  EXPECT_EQ(git(remote(), "rev-parse " + ref + "^{tree}"),
            git(remote(), "rev-parse " + ref + "~1^{tree}"));
}

// A claim counts the records of the copy it takes: a progress file of one
// blob from the cache before the copy is written (the claim is pushed while
// the writers work), a chunked one by its writer.
TEST_F(CheckpointStoreTest, AClaimCarriesTheRecordsOfAProgressFileOfOneBlobOrOfChunks) {
  const auto runs_a = temp_.path() / "runs-a";
  std::string lines;
  for (int i = 0; i < 5000; ++i) lines += "{\"test_id\":\"t" + std::to_string(100000 + i) + "\"}\n";
  ASSERT_GT(lines.size(), 64u * 1024) << "not chunked in checkpoints";
  for (const auto* id : {"small", "large"}) {
    const auto dir = make_run(runs_a, id, 1);
    if (std::string(id) == "large") write_file(dir / "index.jsonl", lines);
    CheckpointStore(config("a")).save(dir, "pod-a", info(id));
  }
  const auto runs_b = temp_.path() / "runs-b";
  fs::create_directories(runs_b);
  const auto report = restore(CheckpointStore(config("b")), runs_b, "pod-b");
  EXPECT_TRUE(report.problems.empty()) << report.problems.front();
  ASSERT_EQ(report.claimed.size(), 2u);
  for (const auto& [id, records] : {std::pair{"small", "2"}, std::pair{"large", "5000"}}) {
    const auto message = git(remote(), "log -1 --format=%B " + branch_ref({"pod-a", id}));
    EXPECT_NE(message.find("Inflight-Pod: pod-b"), std::string::npos) << message;
    EXPECT_NE(message.find(std::string("Inflight-Records: ") + records + "\n"), std::string::npos)
        << message;
    EXPECT_EQ(read_file(runs_b / id / "index.jsonl"), read_file(runs_a / id / "index.jsonl"));
  }
}

// A tree that breaks the rules is refused before it is claimed, even with a
// good run-params.json: a claim of a copy that cannot be written would stand,
// and every later look would claim it again. A name no file system holds is
// such a tree too.
TEST_F(CheckpointStoreTest, AHostileTreeIsRefusedBeforeItIsClaimed) {
  const auto repo = remote().string();
  for (const std::string& entry : {std::string("120000 link"), "100644 " + std::string(256, 'n')}) {
    const auto id = entry.starts_with("120000") ? "linked" : "named";
    CheckpointStore(config("a")).save(make_run(temp_.path() / "runs-a", id, 1), "pod-a", info(id));
    const auto ref = branch_ref({"pod-a", id});
    const auto blob = trimmed(run("printf x | git -C " + repo + " hash-object -w --stdin"));
    const auto mode = entry.substr(0, 6), name = entry.substr(7);
    const auto tree =
        trimmed(run("(git -C " + repo + " ls-tree " + ref + "; printf '" + mode + " blob " + blob +
                    "\\t" + name + "\\n') | git -C " + repo + " mktree"));
    const auto commit = trimmed(git(remote(), "commit-tree " + tree + " -p " + ref + " -m bad"));
    git(remote(), "update-ref " + ref + " " + commit);
    const auto runs_b = temp_.path() / ("runs-b-" + std::string(id));
    fs::create_directories(runs_b);
    const auto report = restore(CheckpointStore(config("b")), runs_b, "pod-b");
    EXPECT_TRUE(report.claimed.empty()) << id;
    ASSERT_EQ(report.problems.size(), 1u) << id;
    EXPECT_NE(report.problems[0].find(entry.starts_with("120000") ? "symbolic link" : "longer"),
              std::string::npos)
        << report.problems[0];
    EXPECT_EQ(trimmed(git(remote(), "rev-parse " + ref)), commit) << id << " was claimed";
    EXPECT_TRUE(fs::is_empty(runs_b)) << id;
    git(remote(), "update-ref -d " + ref);  // out of the next restore's way
  }
}

TEST_F(CheckpointStoreTest, LocalCopyWithMoreAttemptsWinsButTheBranchIsStillClaimed) {
  const auto dir = make_run(temp_.path() / "runs-a", "r1", 1);
  CheckpointStore(config("a")).save(dir, "pod-a", info("r1"));
  const auto runs = temp_.path() / "runs-local";
  make_run(runs, "r1", 2);
  write_file(runs / "r1" / "local-only", "kept");
  const auto claimed = restore(CheckpointStore(config("b")), runs, "pod-b",
                               {{"r1", {.attempts = 2, .origin_pod = "pod-a"}}})
                           .claimed;
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].params.attempts.size(), 2u);
  EXPECT_EQ(read_file(runs / "r1" / "local-only"), "kept");
  EXPECT_NE(git(remote(), "log -1 --format=%s refs/heads/inflight/pod-a/r1").find("(claim)"),
            std::string::npos);
  // The local copy won: the claim carries its tree, not the tip's.
  EXPECT_NE(git(remote(), "ls-tree refs/heads/inflight/pod-a/r1 local-only"), "");
}

// Each run of a batch answers for itself: one over the restore limits fails
// with its kind, and what it left out is reported; the others land.
TEST_F(CheckpointStoreTest, ARunOverTheLimitsFailsAloneInABatch) {
  auto limited = config("a");
  limited.restore_limits.max_files = 5;
  CheckpointStore store(limited);
  const auto runs = temp_.path() / "runs-a";
  const auto small = make_run(runs, "small", 1);
  ASSERT_EQ(::mkfifo((small / "pipe").c_str(), 0600), 0);
  const auto big = make_run(runs, "big", 1);
  for (int i = 0; i < 5; ++i) write_file(big / ("f" + std::to_string(i)), "x");
  const auto report =
      store.save_all({{.run_dir = small, .origin_pod = "pod-a", .info = info("small")},
                      {.run_dir = big, .origin_pod = "pod-a", .info = info("big")}},
                     std::nullopt);
  ASSERT_FALSE(report.runs[0].error) << *report.runs[0].error;
  EXPECT_TRUE(has_ref("refs/heads/inflight/pod-a/small"));
  ASSERT_EQ(report.runs[0].left_out.named.size(), 1u);
  EXPECT_EQ(report.runs[0].left_out.named[0], (LeftOutEntry{.path = "pipe", .rule = "FIFO"}));
  ASSERT_TRUE(report.runs[1].error);
  EXPECT_EQ(report.runs[1].snapshot_failure, Failure::over_limit);
  EXPECT_NE(report.runs[1].error->find("more than 5 files"), std::string::npos);
  EXPECT_FALSE(has_ref("refs/heads/inflight/pod-a/big"));
}

// A run that finished over the limits cannot push its final state; its
// branch goes anyway, so that no other pod runs it again.
TEST_F(CheckpointStoreTest, ARunFinishedOverTheLimitsStillLosesItsBranch) {
  const auto dir = make_run(temp_.path() / "runs-a", "r1", 1);
  ASSERT_TRUE(CheckpointStore(config("a")).save(dir, "pod-a", info("r1")));
  ASSERT_TRUE(has_ref("refs/heads/inflight/pod-a/r1"));
  for (int i = 0; i < 10; ++i) write_file(dir / ("f" + std::to_string(i)), "x");
  auto limited = config("a");
  limited.restore_limits.max_files = 5;
  const auto released =
      release_one(CheckpointStore(limited), dir, "pod-a", info("r1", CheckpointReason::final));
  EXPECT_TRUE(released) << released.error().message;
  EXPECT_FALSE(has_ref("refs/heads/inflight/pod-a/r1"));
}

TEST_F(CheckpointStoreTest, FinishedRunsAndReleasedBranchesAreNotRestored) {
  CheckpointStore store(config("a"));
  const auto runs = temp_.path() / "runs-a";
  const auto done = make_run(runs, "done", 1);
  auto params = *read_run_params(done);
  params.final_status = "failed";
  write_run_params(done, params);
  store.save(done, "pod-a", info("done"));
  const auto gone = make_run(runs, "gone", 1);
  store.save(gone, "pod-a", info("gone"));
  release_one(store, gone, "pod-a", info("gone", CheckpointReason::final));
  EXPECT_EQ(git(remote(), "branch --list inflight/pod-a/gone"), "");
  const auto empty = temp_.path() / "runs-b";
  fs::create_directories(empty);
  const auto report = restore(CheckpointStore(config("b")), empty, "pod-b");
  EXPECT_TRUE(report.claimed.empty());
  EXPECT_FALSE(fs::exists(empty / "done"));
  // A finished run's leftover branch is deleted by whoever sees it next.
  EXPECT_EQ(report.released, std::vector<std::string>{"inflight/pod-a/done"});
  EXPECT_EQ(git(remote(), "branch --list inflight/pod-a/done"), "");
}

// A pod that died between a periodic save, whose snapshot caught the run's final state, and the
// final save left a tip whose trailer counts the records seen when the save was asked for: the
// next pod publishes the count of the tree's progress file.
TEST_F(CheckpointStoreTest, APeriodicTipHoldingTheFinalStateIsPublishedWithItsTreesRecords) {
  const auto runs = temp_.path() / "runs-a";
  const auto dir = finished_run(runs, "r1", "succeeded");
  write_file(dir / "index.jsonl", "{\"t\":1}\n{\"t\":2}\n{\"t\":3}\n{\"t\":4}\n{\"t\":5}\n");
  CheckpointStore(layout_one("a")).save(dir, "pod-a", info("r1", CheckpointReason::periodic));
  const auto empty = temp_.path() / "runs-b";
  fs::create_directories(empty);
  const auto report = restore(CheckpointStore(layout_one("b")), empty, "pod-b");
  EXPECT_EQ(report.released, std::vector<std::string>{"inflight/pod-a/r1"});
  const auto entry =
      parse_index_entry(git(remote(), "show refs/heads/inflight-index:runs/r1.json"));
  ASSERT_TRUE(entry) << entry.error().message;
  EXPECT_EQ(entry->records, 5u);  // the trailer said 2
}

// A finished run (docs/results.md): its final state
// as plain files on its result ref, on top of its final checkpoint, and its
// index entry; then its branch goes.
TEST_F(CheckpointStoreTest, AReleasedRunIsPublishedAsPlainFilesBeforeItsBranchGoes) {
  const auto dir = finished_run(temp_.path() / "runs-a", "r1", "succeeded");
  write_file(dir / "big.bin", std::string(100 * 1024, 'b'));  // chunked in checkpoints
  const auto released = release_one(CheckpointStore(layout_one("a")), dir, "pod-a",
                                    info("r1", CheckpointReason::final));
  ASSERT_TRUE(released) << released.error().message;
  EXPECT_FALSE(has_ref("refs/heads/inflight/pod-a/r1"));
  EXPECT_EQ(git(remote(), "ls-tree -r --name-only refs/inflight-results/r1"),
            "big.bin\nindex.jsonl\nrun-params.json\n");
  EXPECT_EQ(trimmed(git(remote(), "cat-file -s refs/inflight-results/r1:big.bin")), "102400");
  EXPECT_NE(git(remote(), "log -1 --format=%s refs/inflight-results/r1^").find("(final)"),
            std::string::npos);
  const auto entry =
      parse_index_entry(git(remote(), "show refs/heads/inflight-index:runs/r1.json"));
  ASSERT_TRUE(entry) << entry.error().message;
  EXPECT_EQ(entry->final_status, "succeeded");
  EXPECT_EQ(entry->records, 2u);
}

// Another pod that finds the final branch (the release stopped before its
// deletion) publishes the same commit: its publish lands, as a retry's does.
TEST_F(CheckpointStoreTest, TheSameFinalStatePublishedFromAnotherCacheIsTheSameResult) {
  const auto dir = finished_run(temp_.path() / "runs-a", "r1", "failed");
  CheckpointStore a(config("a"));
  const auto final_commit = a.save(dir, "pod-a", info("r1", CheckpointReason::final)).value();
  ASSERT_TRUE(final_commit);
  ASSERT_TRUE(a.publish({*final_commit}).front());
  const auto published = git(remote(), "rev-parse refs/inflight-results/r1");
  CheckpointStore b(config("b"));
  b.remote().fetch("refs/heads/inflight/pod-a/r1");
  const auto again = b.publish({*final_commit}).front();
  EXPECT_TRUE(again) << again.error().message;
  EXPECT_EQ(git(remote(), "rev-parse refs/inflight-results/r1"), published);
}

TEST_F(CheckpointStoreTest, ALaterPublishOfTheSameRunIdIsRefused) {
  CheckpointStore a(layout_one("a"));
  const auto first = finished_run(temp_.path() / "runs-a", "r1", "succeeded");
  ASSERT_TRUE(release_one(a, first, "pod-a", info("r1", CheckpointReason::final)));
  const auto published = git(remote(), "rev-parse refs/inflight-results/r1");
  CheckpointStore b(layout_one("b"));
  const auto second = finished_run(temp_.path() / "runs-b", "r1", "failed");
  append_file(second / "index.jsonl", "{\"test_id\":\"t003\"}\n");
  const auto released = release_one(b, second, "pod-a", info("r1", CheckpointReason::final));
  ASSERT_FALSE(released);
  EXPECT_EQ(released.error().kind, Failure::rejected);
  EXPECT_EQ(git(remote(), "rev-parse refs/inflight-results/r1"), published);
  // The index still describes the first: the entry follows its result.
  const auto entry =
      parse_index_entry(git(remote(), "show refs/heads/inflight-index:runs/r1.json"));
  ASSERT_TRUE(entry) << entry.error().message;
  EXPECT_EQ(entry->final_status, "succeeded");
}

// Runs released together: one push of final states, one of results, one
// index commit, one of deletions; each run's outcome its own.
TEST_F(CheckpointStoreTest, RunsReleasedTogetherShareOneIndexCommit) {
  CheckpointStore first(layout_one("a"));
  ASSERT_TRUE(release_one(first, finished_run(temp_.path() / "runs-a", "taken", "succeeded"),
                          "pod-a", info("taken", CheckpointReason::final)));
  CheckpointStore store(layout_one("b"));
  std::vector<SaveRequest> runs;
  for (const std::string id : {"r1", "r2", "r3", "taken"}) {
    auto run_info = info(id, CheckpointReason::final);
    run_info.total = 40;
    runs.push_back({.run_dir = finished_run(temp_.path() / "runs-b", id, "failed"),
                    .origin_pod = "pod-b",
                    .info = run_info});
  }
  append_file(runs.back().run_dir / "index.jsonl", "{\"test_id\":\"t003\"}\n");
  const auto released = store.release(runs);
  ASSERT_EQ(released.size(), 4u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_TRUE(released[i]) << released[i].error().message;
  ASSERT_FALSE(released[3]);
  EXPECT_EQ(released[3].error().kind, Failure::rejected);
  EXPECT_EQ(trimmed(git(remote(), "rev-list --count refs/heads/inflight-index")), "2");
  for (const std::string id : {"r1", "r2", "r3"}) {
    EXPECT_FALSE(has_ref("refs/heads/inflight/pod-b/" + id));
    const auto entry =
        parse_index_entry(git(remote(), "show refs/heads/inflight-index:runs/" + id + ".json"));
    ASSERT_TRUE(entry) << entry.error().message;
    EXPECT_EQ(entry->total, 40u);
  }
  EXPECT_TRUE(has_ref("refs/heads/inflight/pod-b/taken"));  // kept for an operator
}

// An index branch someone rewrote so that `runs` is a file: the next index
// commit drops that file, a fast-forward, and the entry lands.
TEST_F(CheckpointStoreTest, AnIndexRewrittenWithRunsAsAFileTakesEntriesAgain) {
  CheckpointStore first(layout_one("a"));
  ASSERT_TRUE(release_one(first, finished_run(temp_.path() / "runs-a", "r0", "succeeded"), "pod-a",
                          info("r0", CheckpointReason::final)));
  const auto blob = trimmed(
      run("printf 'not a folder' | git -C '" + remote().string() + "' hash-object -w --stdin"));
  const auto tree = trimmed(run("printf '100644 blob " + blob + "\\truns\\n' | git -C '" +
                                remote().string() + "' mktree"));
  const auto rewritten =
      trimmed(git(remote(), "commit-tree -m rewritten " + tree + " -p refs/heads/inflight-index"));
  git(remote(), "update-ref refs/heads/inflight-index " + rewritten);

  CheckpointStore store(layout_one("b"));
  const auto released = release_one(store, finished_run(temp_.path() / "runs-b", "r1", "failed"),
                                    "pod-b", info("r1", CheckpointReason::final));
  ASSERT_TRUE(released) << released.error().message;
  EXPECT_EQ(trimmed(git(remote(), "rev-parse refs/heads/inflight-index^")), rewritten);
  const auto entry =
      parse_index_entry(git(remote(), "show refs/heads/inflight-index:runs/r1.json"));
  ASSERT_TRUE(entry) << entry.error().message;
  EXPECT_EQ(entry->final_status, "failed");
  EXPECT_FALSE(has_ref("refs/heads/inflight/pod-b/r1"));
}

// A result ref whose name is no run id is named, not taken for a run.
TEST_F(CheckpointStoreTest, AResultRefNamedNoRunIdIsAProblemLeftAlone) {
  CheckpointStore first(config("a"));
  ASSERT_TRUE(release_one(first, finished_run(temp_.path() / "runs-a", "r0", "succeeded"), "pod-a",
                          info("r0", CheckpointReason::final)));
  git(remote(), "update-ref refs/inflight-results/_hostile refs/inflight-results/r0");
  const auto report = restore(CheckpointStore(config("b")), temp_.path() / "runs-b", "pod-b");
  ASSERT_EQ(report.published.size(), 1u);
  EXPECT_EQ(report.published.front().run_id, "r0");
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_EQ(report.problems.front(), "refs/inflight-results/_hostile: not a run id; left alone");
}

// The release steps that ride serve's periodic pushes (docs/results.md), each with a checkpoint of
// a running run and the lease: the final state, the result and the index entry, then the deletion.
// A result another pod published first refuses the run, and its entry is put back as it was; an
// entry is also written again on its own.
TEST_F(CheckpointStoreTest, ReleaseStepsRideBatchedSaves) {
  CheckpointStore first(layout_one("a"));
  ASSERT_TRUE(release_one(first, finished_run(temp_.path() / "runs-a", "taken", "succeeded"),
                          "pod-a", info("taken", CheckpointReason::final)));
  CheckpointStore store(layout_one("b"));
  const auto runs = temp_.path() / "runs-b";
  const SaveRequest running{
      .run_dir = make_run(runs, "live", 3), .origin_pod = "pod-b", .info = info("live")};
  const auto done = pod_b_final(runs, "r1", "succeeded");
  const auto taken = other_copy_of_taken(runs);
  const LeaseStep lease{.lease = {.pod = "pod-b", .until = 1'800'000'000}, .release = false};

  const auto finals = store.save_all({running}, lease, {.finals = {done, taken}});
  ASSERT_EQ(finals.finals.size(), 2u);
  ASSERT_TRUE(finals.finals[0]) << finals.finals[0].error().message;
  ASSERT_TRUE(*finals.finals[0]);
  EXPECT_EQ(finals.finals[1].error().kind, Failure::rejected);
  EXPECT_TRUE(has_ref("refs/inflight-results/r1"));
  EXPECT_TRUE(has_ref("refs/heads/inflight/pod-b/live"));
  EXPECT_FALSE(finals.lease_error);
  EXPECT_NE(git(remote(), "log -1 --format=%s refs/heads/inflight/pod-b/r1").find("(final)"),
            std::string::npos);
  ASSERT_TRUE(finals.index);
  EXPECT_TRUE(*finals.index) << finals.index->error().message;
  const auto entry =
      parse_index_entry(git(remote(), "show refs/heads/inflight-index:runs/r1.json"));
  ASSERT_TRUE(entry) << entry.error().message;
  EXPECT_EQ(entry->final_status, "succeeded");
  const auto kept =
      parse_index_entry(git(remote(), "show refs/heads/inflight-index:runs/taken.json"));
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_EQ(kept->final_status, "succeeded");  // pod-a's, not this pod's "failed"

  const auto indexed = store.save_all({}, lease, {.indexed = {**finals.finals[0]}});
  ASSERT_TRUE(indexed.index);
  EXPECT_TRUE(*indexed.index) << indexed.index->error().message;

  const auto deleted = store.save_all({}, lease, {.deletions = {done}});
  ASSERT_EQ(deleted.deletions.size(), 1u);
  EXPECT_TRUE(deleted.deletions[0]) << deleted.deletions[0].error().message;
  EXPECT_FALSE(has_ref("refs/heads/inflight/pod-b/r1"));
  EXPECT_TRUE(has_ref("refs/heads/inflight/pod-b/taken"));  // kept for an operator
}

// A run fenced as it finished: its final push finds the branch another
// instance's, so the result this push created with it is taken back, and
// its index entry with it; the owner's publish stays free.
TEST_F(CheckpointStoreTest, AResultCreatedBesideATakenFinalBranchIsTakenBack) {
  CheckpointStore owner(layout_one("a"));
  ASSERT_TRUE(owner.save(make_run(temp_.path() / "runs-a", "r1", 2), "pod-b", info("r1")));
  CheckpointStore fenced(layout_one("b"));
  const SaveRequest done{.run_dir = finished_run(temp_.path() / "runs-b", "r1", "succeeded"),
                         .origin_pod = "pod-b",
                         .info = info("r1", CheckpointReason::final)};
  const auto report = fenced.save_all({}, std::nullopt, {.finals = {done}});
  ASSERT_EQ(report.finals.size(), 1u);
  ASSERT_FALSE(report.finals[0]);
  EXPECT_EQ(report.finals[0].error().kind, Failure::rejected);
  EXPECT_FALSE(has_ref("refs/inflight-results/r1"));
  EXPECT_EQ(git(remote(), "ls-tree -r --name-only refs/heads/inflight-index").find("runs/r1.json"),
            std::string::npos);
}

// Layout 2 (docs/design/history-layout.md §3.4): a publish adds its entry to the log, with the
// result's commit, and leaves layout 1's index alone; a later publish of the run id is refused
// and the log still describes the first.
TEST_F(CheckpointStoreTest, OnLayoutTwoAPublishAddsItsEntryToTheLog) {
  start_runs_log();
  CheckpointStore a(config("a"));
  ASSERT_TRUE(release_one(a, finished_run(temp_.path() / "runs-a", "r1", "succeeded"), "pod-a",
                          info("r1", CheckpointReason::final)));
  auto entries = logged();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries.at("r1").final_status, "succeeded");
  EXPECT_EQ(entries.at("r1").records, 2u);
  EXPECT_EQ(entries.at("r1").result_commit,
            trimmed(git(remote(), "rev-parse refs/inflight-results/r1")));
  EXPECT_FALSE(has_ref("refs/heads/inflight-index"));
  EXPECT_FALSE(a.cache().contains(trimmed(git(remote(), "rev-parse " + std::string(kRunsLogRef)))));

  CheckpointStore b(config("b"));
  const auto again = finished_run(temp_.path() / "runs-b", "r1", "failed");
  append_file(again / "index.jsonl", "{\"test_id\":\"t003\"}\n");
  const auto refused = release_one(b, again, "pod-a", info("r1", CheckpointReason::final));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, Failure::rejected);
  EXPECT_EQ(logged().at("r1").final_status, "succeeded");
  EXPECT_EQ(trimmed(git(remote(), "rev-list --count " + std::string(kRunsLogRef))), "2");
}

// The same run dir published again from another final commit (another pod found the branch
// first): its publish stands, and its entry names the result commit the ref holds, not its own.
TEST_F(CheckpointStoreTest, OnLayoutTwoAnEntryNamesTheResultThatStands) {
  start_runs_log();
  const auto dir = finished_run(temp_.path() / "runs-a", "r1", "succeeded");
  CheckpointStore a(config("a"));
  const auto first = a.save(dir, "pod-a", info("r1", CheckpointReason::final)).value();
  ASSERT_TRUE(first);
  ASSERT_TRUE(a.publish({*first}).front());
  const auto held = trimmed(git(remote(), "rev-parse refs/inflight-results/r1"));
  // A result's time is its final commit's, in seconds: the next second makes another commit.
  const auto second_of_first = std::time(nullptr);
  while (std::time(nullptr) == second_of_first) std::this_thread::yield();
  CheckpointStore b(config("b"));
  const auto second = b.save(dir, "pod-b", info("r1", CheckpointReason::final)).value();
  ASSERT_TRUE(second);
  ASSERT_NE(*second, *first);
  const auto again = b.publish({*second}).front();
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(logged().at("r1").result_commit, held);
  EXPECT_EQ(trimmed(git(remote(), "rev-parse refs/inflight-results/r1")), held);
}

// The release steps on layout 2: the entries of a push's finals go into the log in the same push;
// one whose result another pod published first is set right by the entry of that pod's result,
// and one whose result was taken back by a removal.
TEST_F(CheckpointStoreTest, OnLayoutTwoReleaseStepsSetTheLogRightForRunsThatDoNotStand) {
  start_runs_log();
  CheckpointStore first(config("a"));
  ASSERT_TRUE(release_one(first, finished_run(temp_.path() / "runs-a", "taken", "succeeded"),
                          "pod-a", info("taken", CheckpointReason::final)));
  CheckpointStore owner(config("c"));
  ASSERT_TRUE(owner.save(make_run(temp_.path() / "runs-c", "fenced", 2), "pod-b", info("fenced")));
  CheckpointStore store(config("b"));
  const auto runs = temp_.path() / "runs-b";
  const auto done = pod_b_final(runs, "r1", "succeeded");
  const auto taken = other_copy_of_taken(runs);
  const auto fenced = pod_b_final(runs, "fenced", "succeeded");

  const auto finals = store.save_all({}, std::nullopt, {.finals = {done, taken, fenced}});
  ASSERT_EQ(finals.finals.size(), 3u);
  ASSERT_TRUE(finals.finals[0]) << finals.finals[0].error().message;
  EXPECT_EQ(finals.finals[1].error().kind, Failure::rejected);
  EXPECT_EQ(finals.finals[2].error().kind, Failure::rejected);
  ASSERT_TRUE(finals.index);
  EXPECT_TRUE(*finals.index) << finals.index->error().message;
  EXPECT_FALSE(has_ref("refs/inflight-results/fenced"));
  auto entries = logged();
  EXPECT_EQ(entries.at("r1").result_commit,
            trimmed(git(remote(), "rev-parse refs/inflight-results/r1")));
  EXPECT_EQ(entries.at("taken").final_status, "succeeded");  // pod-a's, not this pod's "failed"
  EXPECT_EQ(entries.at("taken").result_commit,
            trimmed(git(remote(), "rev-parse refs/inflight-results/taken")));
  EXPECT_FALSE(entries.contains("fenced"));
  EXPECT_FALSE(has_ref("refs/heads/inflight-index"));
  // The root, pod-a's delta, this push's and the one that set it right.
  EXPECT_EQ(trimmed(git(remote(), "rev-list --count " + std::string(kRunsLogRef))), "4");

  const auto indexed = store.save_all({}, std::nullopt, {.indexed = {**finals.finals[0]}});
  ASSERT_TRUE(indexed.index);
  EXPECT_TRUE(*indexed.index) << indexed.index->error().message;
  EXPECT_EQ(logged().size(), 2u);
}

// Layout 2's archive (docs/design/history-layout.md §3.4): once a run's entry is in the log, the
// release's last push folds its result into the archive, with its markers in the fold's tree,
// without a byte of the archive downloaded; another pod's fold goes on top of it, and every fold
// keeps its result, M(id), S(id, status) and the marker K that lookups know is there reachable.
TEST_F(CheckpointStoreTest, OnLayoutTwoAReleaseFoldsItsResultIntoTheArchive) {
  CheckpointStore a(config("a"));
  const auto r1 = r1_released_on_layout_two(a);
  const auto archive = std::string(kArchiveRef);
  const auto hex = [](const Marker& marker) { return oid_hex(marker_id(marker)); };
  const auto in_tip = [&](const std::string& run_id) {
    return trimmed(git(remote(), "rev-parse " + archive + ":" + run_id));
  };
  EXPECT_EQ(trimmed(git(remote(), "rev-list --parents -1 " + archive)).substr(41),
            hex(archive_genesis()) + " " + r1);
  EXPECT_EQ(in_tip("r1"), hex(status_marker("r1", "succeeded")));
  EXPECT_TRUE(a.cache().pushed_under(std::string(kFoldRecordPrefix)).empty());
  const auto first_fold = trimmed(git(remote(), "rev-parse " + archive));

  CheckpointStore b(config("b"));
  const auto runs = temp_.path() / "runs-b";
  const auto report =
      b.save_all({}, std::nullopt, {.finals = {pod_b_final(runs, "r2", "cancelled")}});
  ASSERT_TRUE(report.finals.at(0)) << report.finals[0].error().message;
  // The entry landed with the result: the fold follows, in a push of its own.
  const auto r2 = trimmed(git(remote(), "rev-parse refs/inflight-results/r2"));
  EXPECT_EQ(trimmed(git(remote(), "rev-list --parents -1 " + archive)).substr(41),
            first_fold + " " + r2);
  EXPECT_EQ(in_tip("r2"), hex(status_marker("r2", "cancelled")));
  EXPECT_FALSE(b.cache().contains(first_fold));
  EXPECT_TRUE(b.cache().pushed_under(std::string(kFoldRecordPrefix)).empty());
  // The server took a fold from this cache: the next one rides the next push, here the deletion.
  const auto second_fold = trimmed(git(remote(), "rev-parse " + archive));
  ASSERT_TRUE(
      b.save_all({}, std::nullopt, {.finals = {pod_b_final(runs, "r3", "failed")}}).finals.at(0));
  EXPECT_EQ(trimmed(git(remote(), "rev-parse " + archive)), second_fold);
  EXPECT_EQ(b.cache().pushed_under(std::string(kFoldRecordPrefix)).size(), 1u);
  const auto deleted =
      b.save_all({}, std::nullopt, {.deletions = {pod_b_final(runs, "r2", "cancelled")}});
  ASSERT_TRUE(deleted.deletions.at(0)) << deleted.deletions[0].error().message;
  EXPECT_TRUE(b.cache().pushed_under(std::string(kFoldRecordPrefix)).empty());
  const auto r3 = trimmed(git(remote(), "rev-parse refs/inflight-results/r3"));
  const auto reached = git(remote(), "rev-list --objects " + archive);
  for (const auto& commit :
       {r1, r2, r3, hex(published_marker("r1")), hex(published_marker("r2")), hex(archive_known())})
    EXPECT_NE(reached.find(commit), std::string::npos) << commit;
  git(remote(), "fsck --no-dangling");  // every object a fold names is there
}

// Once folded, a result needs no ref (layout 2's unref, docs/results.md): a pod that meets the run
// in the log alone counts it published. Its leftover branch with the same final state goes (the
// archive holds that result), `runs list` shows the run once, and `runs show` fetches the result
// by its id.
TEST_F(CheckpointStoreTest, AFoldedRunWithoutItsResultRefIsStillPublished) {
  CheckpointStore a(config("a"));
  const auto r1 = r1_released_on_layout_two(a);
  git(remote(), "update-ref refs/heads/inflight/pod-a/r1 " + r1 + "^");
  git(remote(), "update-ref -d refs/inflight-results/r1");

  const auto log_tip = trimmed(git(remote(), "rev-parse " + std::string(kRunsLogRef)));
  CheckpointStore b(config("b"));
  const auto looked_up = b.look_up({"r1", "r2", "../r1"});
  ASSERT_EQ(looked_up.size(), 3u);
  EXPECT_EQ(looked_up[0].answer, LookedUpRun::Answer::yes);
  ASSERT_TRUE(looked_up[0].entry);
  EXPECT_EQ(looked_up[0].entry->final_status, "succeeded");
  EXPECT_EQ(looked_up[1].answer, LookedUpRun::Answer::no);
  EXPECT_EQ(looked_up[2].answer, LookedUpRun::Answer::no);
  EXPECT_FALSE(b.cache().contains(log_tip));
  const auto report = restore(std::move(b), temp_.path() / "runs-b", "pod-b");
  // A pod's restore reads no entry (published_partial): the leftover final branch is looked up,
  // and only then is its entry read, for the result it names.
  EXPECT_TRUE(report.published_partial);
  EXPECT_TRUE(report.published.empty());
  EXPECT_EQ(report.released, std::vector<std::string>{"inflight/pod-a/r1"});
  EXPECT_TRUE(report.claimed.empty());
  // The archive holds the very result the entry names: nothing to create again.
  EXPECT_FALSE(has_ref("refs/inflight-results/r1"));
  EXPECT_FALSE(has_ref("refs/heads/inflight/pod-a/r1"));

  CheckpointStore c(config("c"));
  const auto listing = list_runs(c.cache(), c.remote());
  std::vector<std::string> ids;
  for (const auto& row : listing.runs) ids.push_back(row.id + " " + row.state);
  EXPECT_EQ(ids, std::vector<std::string>{"r1 succeeded"});
  const auto shown = fetch_run(c.cache(), c.remote(), "r1");
  EXPECT_EQ(shown.commit, r1);
  EXPECT_EQ(read_file_at(c.cache(), shown.commit, kRunParamsFile, kMaxRunParamsBytes).has_value(),
            true);
  EXPECT_NE(shown.where.find(kArchiveRef), std::string::npos) << shown.where;
}

// A pod whose run's branch went while it was away, and whose result ref went too once the archive
// reached it (layout 2's unref): its next checkpoint finds the run in the archive and is taken,
// where it would have made the branch again and run a published run on.
TEST_F(CheckpointStoreTest, ABranchGoneWithItsRunFoldedFencesTheNextCheckpoint) {
  start_runs_log();
  CheckpointStore a(config("a"));
  const SaveRequest running{.run_dir = make_run(temp_.path() / "runs-a", "r1", 1),
                            .origin_pod = "pod-a",
                            .info = info("r1")};
  ASSERT_FALSE(a.save_all({running}, std::nullopt, {}).runs.at(0).error);
  git(remote(), "update-ref -d refs/heads/inflight/pod-a/r1");  // another pod took it
  CheckpointStore b(config("b"));
  ASSERT_TRUE(release_one(b, finished_run(temp_.path() / "runs-b", "r1", "succeeded"), "pod-a",
                          info("r1", CheckpointReason::final)));
  ASSERT_TRUE(has_ref(std::string(kArchiveRef)));
  git(remote(), "update-ref -d refs/inflight-results/r1");

  const auto report = a.save_all({running}, std::nullopt, {});
  ASSERT_EQ(report.runs.size(), 1u);
  EXPECT_EQ(report.runs[0].ref, RefOutcome::taken);
  ASSERT_TRUE(report.runs[0].error);
  EXPECT_NE(report.runs[0].error->find("the archive holds its result"), std::string::npos)
      << *report.runs[0].error;
  EXPECT_FALSE(has_ref("refs/heads/inflight/pod-a/r1"));
}

// A pod's restore on layout 2 reads no entry of the log (this one could not be read at all): each
// branch it would claim is looked up in the archive first. A folded run's branch is held, another
// run's is claimed, and a local copy of another folded run is not pushed.
TEST_F(CheckpointStoreTest, WithTheLogUnreadAClaimIsLookedUpInTheArchive) {
  CheckpointStore a(config("a"));
  r1_released_on_layout_two(a);
  ASSERT_TRUE(release_one(a, finished_run(temp_.path() / "runs-a", "r3", "succeeded"), "pod-a",
                          info("r3", CheckpointReason::final)));
  for (const auto* id : {"r1", "r3"})
    git(remote(), "update-ref -d refs/inflight-results/" + std::string(id));
  CheckpointStore o(config("o"));
  for (const auto* id : {"r1", "r2"})
    ASSERT_TRUE(o.save(make_run(temp_.path() / "runs-o", id, 1), "pod-a", info(id)));
  const auto empty_tree = trimmed(git(remote(), "hash-object -t tree -w /dev/null"));
  const auto no_layout = trimmed(git(remote(), "commit-tree " + empty_tree + " -m broken"));
  git(remote(), "update-ref " + std::string(kRunsLogRef) + " " + no_layout);
  const auto runs = temp_.path() / "runs-b";
  make_run(runs, "r3", 1);  // a copy of a folded run, with no branch

  const auto report = restore(CheckpointStore(config("b")), runs, "pod-b",
                              {{"r3", {.attempts = 1, .origin_pod = "pod-a"}}});
  ASSERT_EQ(report.claimed.size(), 1u);
  EXPECT_EQ(report.claimed[0].params.run_id, "r2");
  ASSERT_EQ(report.held.size(), 1u);
  EXPECT_NE(report.held[0].reason.find("may be published (" + std::string(kArchiveRef) +
                                       " holds its result)"),
            std::string::npos)
      << report.held[0].reason;
  // The copy of the folded run is reported with the published runs, so that serve takes it as
  // stale and does not resume it.
  ASSERT_EQ(report.published.size(), 1u);
  EXPECT_EQ(report.published[0].run_id, "r3");
  EXPECT_TRUE(report.published_partial);
  EXPECT_TRUE(report.problems.empty()) << report.problems[0];
  const auto stale = read_run_params(runs / "r3");  // the copy of the folded run
  EXPECT_TRUE(stale && stale->handed_over);
  EXPECT_FALSE(has_ref("refs/heads/inflight/pod-a/r3"));
}

// `inflight run` and `inflight resume` (a restore of one run) on layout 2 download no entry of the
// log: the run named is looked up in the archive, and so is its status. A folded run without its
// ref is published, with the status its markers give; another run id is free to run.
TEST_F(CheckpointStoreTest, OnLayoutTwoARestoreOfOneRunLooksItUpAndReadsNoEntry) {
  CheckpointStore a(config("a"));
  r1_released_on_layout_two(a);
  git(remote(), "update-ref -d refs/inflight-results/r1");
  const auto log_tip = trimmed(git(remote(), "rev-parse " + std::string(kRunsLogRef)));
  const auto one = [&](const std::string& store, const std::string& only) {
    CheckpointStore b(config(store));
    auto report = b.restore({.runs_dir = temp_.path() / ("runs-" + store),
                             .pod = "pod-" + store,
                             .local = {},
                             .judge = accept,
                             .only = only,
                             .lease_until = std::nullopt,
                             .skip = {}});
    EXPECT_FALSE(b.cache().contains(log_tip)) << only;
    return report;
  };
  const auto published = one("b", "r1");
  ASSERT_EQ(published.published.size(), 1u);
  EXPECT_EQ(published.published[0].run_id, "r1");
  ASSERT_TRUE(published.published[0].entry);
  EXPECT_EQ(published.published[0].entry->final_status, "succeeded");
  EXPECT_TRUE(published.problems.empty());
  const auto fresh = one("c", "r7");
  EXPECT_TRUE(fresh.published.empty());
  EXPECT_TRUE(fresh.claimed.empty() && fresh.held.empty() && fresh.problems.empty());
  const auto by_branch = one("d", "refs/heads/inflight/pod-a/r1");  // `inflight resume` of it
  ASSERT_EQ(by_branch.published.size(), 1u);
  ASSERT_TRUE(by_branch.published[0].entry);
  EXPECT_EQ(by_branch.published[0].entry->final_status, "succeeded");
}

// A restore with more runs to ask about than kMaxRestoreLookups reads the log instead: a lookup
// is two connections, one after another.
TEST_F(CheckpointStoreTest, ARestoreOfManyRunsOnLayoutTwoReadsTheLog) {
  CheckpointStore a(config("a"));
  r1_released_on_layout_two(a);
  const auto runs = temp_.path() / "runs-a";
  std::vector<SaveRequest> many;
  for (std::size_t i = 0; i < CheckpointStore::kMaxRestoreLookups; ++i) {
    const auto id = "m" + std::to_string(i);
    many.push_back({.run_dir = make_run(runs, id, 1), .origin_pod = "pod-a", .info = info(id)});
  }
  ASSERT_FALSE(a.save_all(many, std::nullopt, {}).runs.at(0).error);
  // Sixteen branches, and the unbranched local copy: seventeen runs to ask about.
  const auto report = restore(CheckpointStore(config("b")), temp_.path() / "runs-b", "pod-b",
                              {{"r9", {.attempts = 1, .origin_pod = "pod-b"}}});
  EXPECT_FALSE(report.published_partial);
  ASSERT_EQ(report.published.size(), 1u);
  EXPECT_EQ(report.published[0].run_id, "r1");
  ASSERT_TRUE(report.published[0].entry);  // from the log
  EXPECT_EQ(report.claimed.size(), CheckpointStore::kMaxRestoreLookups);
}

// The same run's leftover branch with another final state than the one the log names is kept for
// an operator: publishing it would make a second result.
TEST_F(CheckpointStoreTest, AFoldedRunsBranchWithAnotherFinalStateIsKept) {
  CheckpointStore a(config("a"));
  const auto r1 = r1_released_on_layout_two(a);
  git(remote(), "update-ref -d refs/inflight-results/r1");
  CheckpointStore other(config("other"));
  ASSERT_TRUE(other.save(finished_run(temp_.path() / "runs-o", "r1", "failed"), "pod-a",
                         info("r1", CheckpointReason::final)));
  const auto report = restore(CheckpointStore(config("b")), temp_.path() / "runs-b", "pod-b");
  EXPECT_TRUE(report.released.empty());
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_NE(report.problems[0].find("published with another result (" + r1), std::string::npos)
      << report.problems[0];
  EXPECT_TRUE(has_ref("refs/heads/inflight/pod-a/r1"));
  EXPECT_FALSE(has_ref("refs/inflight-results/r1"));
}

// The unref: once the fold of a run landed and the retention passed, the next push of the pod
// that folded it deletes its result ref; the archive keeps the result, and the log the run.
TEST_F(CheckpointStoreTest, OnLayoutTwoAFoldedResultRefGoesOnceItsRetentionPassed) {
  CheckpointStore a(config("a"));  // the default retention
  const auto r1 = r1_released_on_layout_two(a);
  ASSERT_EQ(a.cache().pushed_under(std::string(kFoldedRecordPrefix)).size(), 1u);
  a.save_all({}, std::nullopt, {});
  EXPECT_TRUE(has_ref("refs/inflight-results/r1"));
  a.persist();

  auto at_once = config("a");
  at_once.results_ref_retention = std::chrono::seconds(0);
  CheckpointStore later(at_once);  // the same cache, once the retention passed
  later.save_all({}, std::nullopt, {});
  EXPECT_FALSE(has_ref("refs/inflight-results/r1"));
  EXPECT_TRUE(later.cache().pushed_under(std::string(kFoldedRecordPrefix)).empty());
  EXPECT_NE(git(remote(), "rev-list " + std::string(kArchiveRef)).find(r1), std::string::npos);
  git(remote(), "fsck --no-dangling");
  CheckpointStore b(config("b"));
  const auto looked_up = b.look_up({"r1"});
  ASSERT_EQ(looked_up.size(), 1u);
  EXPECT_EQ(looked_up[0].answer, LookedUpRun::Answer::yes);
}

// A result ref gone or moved before the unref (a prune, another publish) is left as it is, and
// the record goes; a record the cache cannot parse goes too.
TEST_F(CheckpointStoreTest, AnUnrefOfAResultRefThatMovedLeavesIt) {
  CheckpointStore a(config("a"));
  const auto r1 = r1_released_on_layout_two(a);
  const auto other = trimmed(git(remote(), "rev-parse " + r1 + "^"));
  git(remote(), "update-ref refs/inflight-results/r1 " + other);
  a.cache().remember_pushed(std::string(kFoldedRecordPrefix) + "soon/r2", r1);
  a.persist();
  auto at_once = config("a");
  at_once.results_ref_retention = std::chrono::seconds(0);
  CheckpointStore later(at_once);
  later.save_all({}, std::nullopt, {});
  EXPECT_EQ(trimmed(git(remote(), "rev-parse refs/inflight-results/r1")), other);
  EXPECT_TRUE(later.cache().pushed_under(std::string(kFoldedRecordPrefix)).empty());
}

// Once a run's ref went, its marker is what refuses a second publish: a release of another final
// state of the run, by `inflight run` (publish) or by serve (the release steps), is rejected as
// published by another pod first, and creates no result ref and no log line.
TEST_F(CheckpointStoreTest, APublishOfARunWhoseRefWentAfterItsFoldIsRejected) {
  CheckpointStore a(config("a"));
  r1_released_on_layout_two(a);
  a.persist();
  auto at_once = config("a");
  at_once.results_ref_retention = std::chrono::seconds(0);
  CheckpointStore(at_once).save_all({}, std::nullopt, {});
  ASSERT_FALSE(has_ref("refs/inflight-results/r1"));
  const auto log = trimmed(git(remote(), "rev-parse " + std::string(kRunsLogRef)));

  CheckpointStore b(config("b"));
  const auto released = release_one(b, finished_run(temp_.path() / "runs-b", "r1", "failed"),
                                    "pod-a", info("r1", CheckpointReason::final));
  ASSERT_FALSE(released);
  EXPECT_EQ(released.error().kind, Failure::rejected);
  EXPECT_NE(released.error().message.find("published by another pod first (" +
                                          std::string(kArchiveRef) + " holds its result)"),
            std::string::npos)
      << released.error().message;
  CheckpointStore c(config("c"));
  const auto steps = c.save_all({}, std::nullopt,
                                {.finals = {pod_b_final(temp_.path() / "runs-c", "r1", "failed")}});
  ASSERT_EQ(steps.finals.size(), 1u);
  ASSERT_FALSE(steps.finals[0]);
  EXPECT_EQ(steps.finals[0].error().kind, Failure::rejected);
  EXPECT_FALSE(has_ref("refs/inflight-results/r1"));
  EXPECT_EQ(trimmed(git(remote(), "rev-parse " + std::string(kRunsLogRef))), log);
}

// A layout 1 repo has no archive: nothing is recorded for a fold, and no push carries one.
TEST_F(CheckpointStoreTest, OnLayoutOneNothingIsFolded) {
  CheckpointStore a(layout_one("a"));
  ASSERT_TRUE(release_one(a, finished_run(temp_.path() / "runs-a", "r1", "succeeded"), "pod-a",
                          info("r1", CheckpointReason::final)));
  EXPECT_TRUE(has_ref("refs/heads/inflight-index"));
  EXPECT_FALSE(has_ref(std::string(kArchiveRef)));
  EXPECT_TRUE(a.cache().pushed_under(std::string(kFoldRecordPrefix)).empty());
}

// A results repo with no index starts in layout 2 (docs/results.md "The history layout"), even
// with a result ref there already (a publish lands its results before its entries): the first
// publish starts the log, then folds the result into the archive.
TEST_F(CheckpointStoreTest, AResultsRepoWithNoIndexStartsInLayoutTwo) {
  run("git init -q --bare '" + remote().string() + "'");
  const auto empty_tree = trimmed(git(remote(), "hash-object -t tree -w /dev/null"));
  git(remote(), "update-ref refs/inflight-results/r0 " +
                    trimmed(git(remote(), "commit-tree -m r0 " + empty_tree)));
  CheckpointStore a(config("a"));
  ASSERT_TRUE(release_one(a, finished_run(temp_.path() / "runs-a", "r1", "succeeded"), "pod-a",
                          info("r1", CheckpointReason::final)));
  EXPECT_FALSE(has_ref("refs/heads/inflight-index"));
  EXPECT_EQ(logged().at("r1").final_status, "succeeded");
  const auto looked_up = CheckpointStore(config("b")).look_up({"r1"});
  ASSERT_EQ(looked_up.size(), 1u);
  EXPECT_EQ(looked_up[0].answer, LookedUpRun::Answer::yes);
}

// A pod told --results-layout 1 writes the log a repo has, and deletes no result ref once the
// retention passed: pods of earlier releases read only the refs.
TEST_F(CheckpointStoreTest, APodToldLayoutOneWritesTheLogItFindsAndKeepsItsRefs) {
  start_runs_log();
  auto one = layout_one("c");
  one.results_ref_retention = std::chrono::seconds(0);
  CheckpointStore c(one);
  ASSERT_TRUE(release_one(c, finished_run(temp_.path() / "runs-c", "r2", "failed"), "pod-c",
                          info("r2", CheckpointReason::final)));
  EXPECT_FALSE(has_ref("refs/heads/inflight-index"));
  EXPECT_EQ(logged().at("r2").final_status, "failed");
  c.save_all({}, std::nullopt, {});
  EXPECT_TRUE(has_ref("refs/inflight-results/r2"));
  EXPECT_TRUE(c.cache().pushed_under(std::string(kFoldedRecordPrefix)).empty());
  const auto looked_up = c.look_up({"r2"});
  ASSERT_EQ(looked_up.size(), 1u);
  EXPECT_EQ(looked_up[0].answer, LookedUpRun::Answer::yes);  // folded all the same
}

// A pod that folded runs, restarted with --results-layout 1 on the same cache, deletes none of
// their refs once the retention passed.
TEST_F(CheckpointStoreTest, APodRestartedWithLayoutOneKeepsTheRefsItFolded) {
  CheckpointStore a(config("a"));
  r1_released_on_layout_two(a);
  ASSERT_EQ(a.cache().pushed_under(std::string(kFoldedRecordPrefix)).size(), 1u);
  a.persist();
  auto one = layout_one("a");
  one.results_ref_retention = std::chrono::seconds(0);
  CheckpointStore(one).save_all({}, std::nullopt, {});
  EXPECT_TRUE(has_ref("refs/inflight-results/r1"));
}

// A record the cache cannot read, or whose commit holds no finished run, is dropped; the others
// are folded all the same, on the archive's tip.
TEST_F(CheckpointStoreTest, AFoldRecordThatCannotBeFoldedIsDropped) {
  CheckpointStore a(config("a"));
  const auto r1 = r1_released_on_layout_two(a);
  const auto archive = std::string(kArchiveRef);
  const auto first_fold = trimmed(git(remote(), "rev-parse " + archive));
  const auto unfinished = a.save(make_run(temp_.path() / "runs-a", "r9", 1), "pod-a", info("r9"));
  ASSERT_TRUE(unfinished && *unfinished);
  a.cache().remember_pushed(fold_record("r9"), **unfinished);            // no final status
  a.cache().remember_pushed(fold_record("gone"), std::string(40, '7'));  // not in the cache
  a.cache().remember_pushed(fold_record("r1"), r1);                      // folded again: harmless
  a.persist();
  a.save_all({}, std::nullopt, {.deletions = {}});
  a.persist();
  EXPECT_TRUE(
      CacheRepo(config("a").cache_dir).pushed_under(std::string(kFoldRecordPrefix)).empty());
  EXPECT_EQ(trimmed(git(remote(), "rev-list --parents -1 " + archive)).substr(41),
            first_fold + " " + r1);
  EXPECT_EQ(git(remote(), "ls-tree --name-only " + archive), ".archive\nr1\n");
}

// Someone pointed the archive at an object the cache holds that is no commit: the fold, riding the
// next push since the server took one from this cache, is refused alone and the checkpoint lands;
// then, alone, it is refused again, and the record goes: the result keeps its ref.
TEST_F(CheckpointStoreTest, AnArchiveTipThatIsNoCommitRefusesTheFoldAlone) {
  CheckpointStore a(config("a"));
  const auto r1 = r1_released_on_layout_two(a);
  ASSERT_FALSE(a.cache().pushed_under(std::string(kFoldsTakenRecord)).empty());
  const auto blob = trimmed(git(remote(), "rev-parse " + r1 + ":run-params.json"));
  ASSERT_TRUE(a.cache().contains(blob));
  git(remote(), "update-ref " + std::string(kArchiveRef) + " " + blob);
  a.cache().remember_pushed(fold_record("r1"), r1);
  const SaveRequest running{.run_dir = make_run(temp_.path() / "runs-a", "live", 1),
                            .origin_pod = "pod-a",
                            .info = info("live")};
  const auto report = a.save_all({running}, std::nullopt, {.deletions = {}});
  ASSERT_EQ(report.runs.size(), 1u);
  EXPECT_FALSE(report.runs[0].error) << *report.runs[0].error;
  EXPECT_TRUE(has_ref("refs/heads/inflight/pod-a/live"));
  EXPECT_EQ(trimmed(git(remote(), "rev-parse " + std::string(kArchiveRef))), blob);
  EXPECT_TRUE(a.cache().pushed_under(std::string(kFoldRecordPrefix)).empty());
  EXPECT_TRUE(a.cache().pushed_under(std::string(kFoldsTakenRecord)).empty());
  EXPECT_TRUE(has_ref("refs/inflight-results/r1"));
}

TEST_F(CheckpointStoreTest, WithPublishOffTheBranchGoesAndNothingIsPublished) {
  auto off = config("a");
  off.publish = false;
  const auto dir = finished_run(temp_.path() / "runs-a", "r1", "cancelled");
  ASSERT_TRUE(release_one(CheckpointStore(off), dir, "pod-a", info("r1", CheckpointReason::final)));
  EXPECT_FALSE(has_ref("refs/heads/inflight/pod-a/r1"));
  EXPECT_FALSE(has_ref("refs/inflight-results/r1"));
  EXPECT_FALSE(has_ref("refs/heads/inflight-index"));
}

TEST_F(CheckpointStoreTest, HostileBranchIsRefusedAndTheOthersStillRestore) {
  const auto runs = temp_.path() / "runs-a";
  CheckpointStore(config("a")).save(make_run(runs, "good", 1), "pod-a", info("good"));
  const auto blob =
      trimmed(run("printf x | git -C " + remote().string() + " hash-object -w --stdin"));
  const auto tree = trimmed(run("printf '100644 blob " + blob + "\\t..\\n' | git -C " +
                                remote().string() + " mktree --missing"));
  const auto commit = trimmed(git(remote(), "commit-tree " + tree + " -m hostile"));
  git(remote(), "update-ref refs/heads/inflight/pod-x/evil " + commit);
  const auto target = temp_.path() / "runs-b";
  fs::create_directories(target);
  const auto report = restore(CheckpointStore(config("b")), target, "pod-b");
  const auto& claimed = report.claimed;
  const auto& problems = report.problems;
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].params.run_id, "good");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("inflight/pod-x/evil"), std::string::npos);
  EXPECT_FALSE(fs::exists(target / "evil"));
  EXPECT_FALSE(fs::exists(temp_.path() / "x"));
}

TEST_F(CheckpointStoreTest, LocalRunWithoutABranchGetsOneAtRestore) {
  const auto runs = temp_.path() / "runs";
  make_run(runs, "only-local", 1);
  const auto report = restore(CheckpointStore(config("a")), runs, "pod-a",
                              {{"only-local", {.attempts = 1, .origin_pod = "pod-a"}}});
  ASSERT_EQ(report.claimed.size(), 1u);
  EXPECT_EQ(report.claimed[0].branch, "refs/heads/inflight/pod-a/only-local");
  const auto subject = git(remote(), "log -1 --format=%s refs/heads/inflight/pod-a/only-local");
  EXPECT_NE(subject.find("(claim)"), std::string::npos);
}

// Regression: a pod that started a little later pushed its claim on top of the
// first pod's fresh claim, and both ran the run.
TEST_F(CheckpointStoreTest, FreshClaimOfAnotherPodIsLeftToIt) {
  const auto dir = make_run(temp_.path() / "runs-a", "r1", 1);
  CheckpointStore(config("a")).save(dir, "pod-a", info("r1"));
  const auto runs_b = temp_.path() / "runs-b";
  const auto runs_c = temp_.path() / "runs-c";
  fs::create_directories(runs_b);
  fs::create_directories(runs_c);
  ASSERT_EQ(restore(CheckpointStore(config("b")), runs_b, "pod-b").claimed.size(), 1u);
  const auto late = restore(CheckpointStore(config("c")), runs_c, "pod-c");
  EXPECT_TRUE(late.claimed.empty());
  ASSERT_EQ(late.left.size(), 1u);
  EXPECT_EQ(late.left[0].run_id, "r1");
  EXPECT_EQ(late.left[0].pod, "pod-b");
  EXPECT_FALSE(fs::exists(runs_c / "r1"));
  // The claimer itself may claim again (a restart of the same pod on its disk).
  EXPECT_EQ(restore(CheckpointStore(config("b")), runs_b, "pod-b",
                    {{"r1", {.attempts = 1, .origin_pod = "pod-a"}}})
                .claimed.size(),
            1u);
}

// Regression: the loser of a claim kept an interrupted copy that a later
// start on its disk resumed, once the winner had finished and deleted the
// branch: the whole run ran twice.
TEST_F(CheckpointStoreTest, ALostClaimMarksTheLocalCopyHandedOver) {
  const auto runs_a = temp_.path() / "runs-a";
  const auto dir = make_run(runs_a, "r1", 1);
  CheckpointStore(config("a")).save(dir, "pod-a", info("r1"));
  const auto runs_b = temp_.path() / "runs-b";
  fs::create_directories(runs_b);
  ASSERT_EQ(restore(CheckpointStore(config("b")), runs_b, "pod-b").claimed.size(), 1u);
  const auto late = restore(CheckpointStore(config("a")), runs_a, "pod-a",
                            {{"r1", {.attempts = 1, .origin_pod = "pod-a"}}});
  ASSERT_EQ(late.left.size(), 1u);
  const auto params = read_run_params(dir);
  ASSERT_TRUE(params && params->handed_over);
  EXPECT_NE(params->handed_over->find("another instance holds the run"), std::string::npos);
  EXPECT_FALSE(params->final_status);
}

// Regression (rollout): a starting pod took the runs of live pods, whose
// periodic checkpoints left their branches in the results repo.
TEST_F(CheckpointStoreTest, ARunOfAPodWithALiveLeaseIsLeftToIt) {
  const auto until = now_plus(60);
  running_run_with_lease(until);
  const auto tip = trimmed(git(remote(), "rev-parse refs/heads/inflight/pod-a/r1"));
  const auto runs_b = temp_.path() / "runs-b";
  fs::create_directories(runs_b);
  const auto report = restore(CheckpointStore(config("b")), runs_b, "pod-b");
  EXPECT_TRUE(report.claimed.empty());
  ASSERT_EQ(report.left.size(), 1u);
  EXPECT_EQ(report.left[0].pod, "pod-a");
  EXPECT_EQ(report.left[0].until, until);
  EXPECT_EQ(trimmed(git(remote(), "rev-parse refs/heads/inflight/pod-a/r1")), tip);
  EXPECT_TRUE(has_ref("refs/heads/inflight-lease/pod-a"));
}

// No wall clock decides (docs/checkpoints.md "Leases and clocks"): a lease
// whose end has passed by this machine's clock holds its runs until the
// caller watched it unchanged for its term; then the run is taken and the
// lease deleted. One renewed since is alive again.
TEST_F(CheckpointStoreTest, ALeaseHoldsItsRunsUntilWatchedUnchangedForItsTerm) {
  running_run_with_lease(now_plus(-600));  // a writer's clock ten minutes behind
  const auto runs_b = temp_.path() / "runs-b";
  fs::create_directories(runs_b);
  const auto first = restore(CheckpointStore(config("b")), runs_b, "pod-b");
  EXPECT_TRUE(first.claimed.empty());
  ASSERT_EQ(first.left.size(), 1u);
  const auto lease_ref = std::string("refs/heads/inflight-lease/pod-a");
  const auto watched = std::find_if(first.watched.begin(), first.watched.end(),
                                    [&](const WatchedRecord& r) { return r.ref == lease_ref; });
  ASSERT_NE(watched, first.watched.end());
  EXPECT_EQ(watched->pod, "pod-a");

  auto renewed = request(runs_b, "pod-b");
  renewed.expired = {{lease_ref, std::string(40, '0')}};
  EXPECT_TRUE(CheckpointStore(config("b")).restore(renewed).claimed.empty());

  auto over = renewed;
  over.expired = {{lease_ref, watched->oid}};
  EXPECT_EQ(CheckpointStore(config("b")).restore(over).claimed.size(), 1u);
  EXPECT_FALSE(has_ref(lease_ref));
}

// A one-shot command cannot watch: --take-over takes the run from a lease
// that is present.
TEST_F(CheckpointStoreTest, TakeOverTakesARunFromALeaseThatIsPresent) {
  running_run_with_lease(now_plus(60));
  const auto runs_b = temp_.path() / "runs-b";
  fs::create_directories(runs_b);
  auto take = request(runs_b, "ops");
  take.only = "r1";
  take.take_over = true;
  EXPECT_EQ(CheckpointStore(config("b")).restore(take).claimed.size(), 1u);
}

TEST_F(CheckpointStoreTest, AShutdownCheckpointHandsTheRunOverDespiteTheLease) {
  const auto dir = running_run_with_lease(now_plus(60));
  CheckpointStore(config("a")).save(dir, "pod-a", info("r1", CheckpointReason::shutdown));
  const auto runs_b = temp_.path() / "runs-b";
  fs::create_directories(runs_b);
  EXPECT_EQ(restore(CheckpointStore(config("b")), runs_b, "pod-b").claimed.size(), 1u);
  // The live pod-a's lease is its own to give up.
  EXPECT_TRUE(has_ref("refs/heads/inflight-lease/pod-a"));
}

// A busy instance leaves a handed-over run to an idle one (the new pod of a
// rolling deploy) until it watched the tip unchanged for claim_lease; after
// that, anyone takes it (a scale-down).
TEST_F(CheckpointStoreTest, ABusyInstanceLeavesAHandedOverRunToAnIdleOneForAWhile) {
  const auto dir = make_run(temp_.path() / "runs-a", "r1", 1);
  CheckpointStore(config("a")).save(dir, "pod-a", info("r1", CheckpointReason::shutdown));
  const auto runs_b = temp_.path() / "runs-b";
  fs::create_directories(runs_b);
  auto busy = request(runs_b, "pod-b");
  busy.leave_handovers = true;
  const auto left = CheckpointStore(config("b")).restore(busy);
  EXPECT_TRUE(left.claimed.empty());
  ASSERT_EQ(left.left.size(), 1u);
  EXPECT_EQ(left.left[0].pod, "pod-a");
  ASSERT_EQ(left.watched.size(), 1u);  // the handover tip, for claim_lease
  EXPECT_EQ(left.watched[0].ref, "refs/heads/inflight/pod-a/r1");
  EXPECT_EQ(left.watched[0].term, 120);
  busy.expired = {{left.watched[0].ref, left.watched[0].oid}};
  EXPECT_EQ(CheckpointStore(config("b")).restore(busy).claimed.size(), 1u);
}

TEST_F(CheckpointStoreTest, TheOwnerItselfTakesItsRunWhateverTheLease) {
  running_run_with_lease(now_plus(60));
  const auto runs = temp_.path() / "runs-a2";
  fs::create_directories(runs);
  EXPECT_EQ(restore(CheckpointStore(config("a2")), runs, "pod-a").claimed.size(), 1u);
}

// A later look of a serving instance must not take its own runs again.
TEST_F(CheckpointStoreTest, SkippedRunsAreLeftAsTheyAre) {
  const auto dir = make_run(temp_.path() / "runs-a", "r1", 1);
  CheckpointStore(config("a")).save(dir, "pod-a", info("r1", CheckpointReason::periodic));
  const auto tip = trimmed(git(remote(), "rev-parse refs/heads/inflight/pod-a/r1"));
  const auto report =
      restore(CheckpointStore(config("a")), temp_.path() / "runs-a", "pod-a", {}, accept, {"r1"});
  EXPECT_TRUE(report.claimed.empty());
  EXPECT_TRUE(report.left.empty());
  EXPECT_EQ(trimmed(git(remote(), "rev-parse refs/heads/inflight/pod-a/r1")), tip);
}

// A restart on a fresh disk under the same pod name renews the lease its
// previous life left, on top of that lease's tip.
TEST_F(CheckpointStoreTest, ALeaseIsRenewedFromAFreshCache) {
  CheckpointStore first(config("a"));
  hold_lease(first.cache(), first.remote(), {.pod = "pod-a", .until = now_plus(10)});
  CheckpointStore second(config("a2"));
  const auto until = now_plus(20);  // once: a second may pass before the check
  hold_lease(second.cache(), second.remote(), {.pod = "pod-a", .until = until});
  const auto message = git(remote(), "log -1 --format=%B refs/heads/inflight-lease/pod-a");
  EXPECT_NE(message.find("Inflight-Lease-Until: " + std::to_string(until)), std::string::npos);
  EXPECT_EQ(git(remote(), "rev-list --count refs/heads/inflight-lease/pod-a"), "2\n");
  drop_lease(second.remote(), "pod-a");
  drop_lease(second.remote(), "pod-a");  // already gone: fine
  EXPECT_FALSE(has_ref("refs/heads/inflight-lease/pod-a"));
}

// Shutdown and periodic ticks push every run at once, with the lease; a
// branch another instance took fences that run only, and the others land.
TEST_F(CheckpointStoreTest, SaveAllPushesEachRunOnItsOwnMerits) {
  const auto runs = temp_.path() / "runs-a";
  std::vector<SaveRequest> requests;
  for (const auto* id : {"r1", "r2", "r3"})
    requests.push_back({.run_dir = make_run(runs, id, 1), .origin_pod = "pod-a", .info = info(id)});
  CheckpointStore store(config("a"));
  store.save(runs / "r2", "pod-a", info("r2", CheckpointReason::periodic));
  const auto runs_b = temp_.path() / "runs-b";
  fs::create_directories(runs_b);
  ASSERT_EQ(restore(CheckpointStore(config("b")), runs_b, "pod-b").claimed.size(), 1u);
  append_file(runs / "r2" / "index.jsonl", "{\"test_id\":\"t003\"}\n");
  const auto claimed = trimmed(git(remote(), "rev-parse refs/heads/inflight/pod-a/r2"));

  const auto report =
      store.save_all(requests, LeaseStep{.lease = {.pod = "pod-a", .until = 1'800'000'000}});
  const auto& outcomes = report.runs;
  EXPECT_FALSE(report.lease_error);
  EXPECT_NE(git(remote(), "log -1 --format=%B " + lease_ref("pod-a")).find("Until: 1800000000"),
            std::string::npos);
  ASSERT_EQ(outcomes.size(), 3u);
  for (const std::size_t i : {0u, 2u}) {
    EXPECT_EQ(outcomes[i].ref, RefOutcome::updated);
    ASSERT_TRUE(outcomes[i].commit);
    EXPECT_EQ(trimmed(git(remote(), "rev-parse " + branch_ref({"pod-a", i ? "r3" : "r1"}))),
              *outcomes[i].commit);
  }
  EXPECT_EQ(outcomes[1].ref, RefOutcome::taken);
  EXPECT_TRUE(outcomes[1].error);
  EXPECT_EQ(trimmed(git(remote(), "rev-parse refs/heads/inflight/pod-a/r2")), claimed);
}

// A pod paused while another took its run, finished and released it finds
// the branch gone and the result there: its save is taken, and the branch is
// not created again. Without a result (pruned by hand), the save lands.
TEST_F(CheckpointStoreTest, ASaveToABranchReleasedByAnotherPodIsTakenNotCreatedAgain) {
  const auto runs = temp_.path() / "runs-a";
  CheckpointStore store(config("a"));
  for (const auto* id : {"r1", "r2"})
    store.save(make_run(runs, id, 1), "pod-a", info(id, CheckpointReason::periodic));
  const auto tip = trimmed(git(remote(), "rev-parse refs/heads/inflight/pod-a/r1"));
  git(remote(), "update-ref " + result_ref("r1") + " " + tip);
  for (const auto* id : {"r1", "r2"}) git(remote(), "update-ref -d " + branch_ref({"pod-a", id}));
  for (const auto* id : {"r1", "r2"})
    append_file(runs / id / "index.jsonl", "{\"test_id\":\"t9\"}\n");

  const auto report =
      store.save_all({{.run_dir = runs / "r1", .origin_pod = "pod-a", .info = info("r1")},
                      {.run_dir = runs / "r2", .origin_pod = "pod-a", .info = info("r2")}},
                     std::nullopt);
  ASSERT_EQ(report.runs.size(), 2u);
  EXPECT_EQ(report.runs[0].ref, RefOutcome::taken);
  ASSERT_TRUE(report.runs[0].error);
  EXPECT_NE(report.runs[0].error->find("the run is published"), std::string::npos);
  EXPECT_FALSE(has_ref(branch_ref({"pod-a", "r1"})));
  EXPECT_EQ(report.runs[1].ref, RefOutcome::updated);
  EXPECT_TRUE(has_ref(branch_ref({"pod-a", "r2"})));
}

// A restart under the same name on a fresh disk finds the lease's tip
// written by another cache; the batch renews it on that tip.
TEST_F(CheckpointStoreTest, SaveAllRenewsALeaseAnotherCacheWrote) {
  CheckpointStore(config("a"))
      .save_all({}, LeaseStep{.lease = {.pod = "pod-a", .until = 1'800'000'000}});
  const auto first = trimmed(git(remote(), "rev-parse " + lease_ref("pod-a")));
  CheckpointStore fresh(config("b"));
  const auto report =
      fresh.save_all({}, LeaseStep{.lease = {.pod = "pod-a", .until = 1'800'000'060}});
  EXPECT_FALSE(report.lease_error);
  EXPECT_EQ(trimmed(git(remote(), "rev-parse " + lease_ref("pod-a") + "^")), first);
  EXPECT_NE(git(remote(), "log -1 --format=%B " + lease_ref("pod-a")).find("Until: 1800000060"),
            std::string::npos);
}

// The last push of a shutdown carries the lease's deletion: one connection
// hands every run over.
TEST_F(CheckpointStoreTest, TheLastShutdownPushReleasesTheLeaseWithTheRuns) {
  const auto dir = make_run(temp_.path() / "runs-a", "r1", 1);
  CheckpointStore store(config("a"));
  const Lease lease{.pod = "pod-a", .until = 1'800'000'000};
  store.save_all({}, LeaseStep{.lease = lease});
  ASSERT_EQ(store.remote().list(lease_ref("pod-a")).size(), 1u);

  const auto report = store.save_all({{.run_dir = dir, .origin_pod = "pod-a", .info = info("r1")}},
                                     LeaseStep{.lease = lease, .release = true});
  EXPECT_FALSE(report.lease_error);
  EXPECT_EQ(report.runs[0].ref, RefOutcome::updated);
  EXPECT_TRUE(store.remote().list(lease_ref("pod-a")).empty());
  EXPECT_EQ(store.remote().list(branch_ref({"pod-a", "r1"})).size(), 1u);
}

// A run whose dir could not be read is on this disk only: the lease stays.
TEST_F(CheckpointStoreTest, ALeaseIsNotReleasedWhileARunCouldNotBeSaved) {
  const auto dir = make_run(temp_.path() / "runs-a", "r1", 1);
  CheckpointStore store(config("a"));
  const Lease lease{.pod = "pod-a", .until = 1'800'000'000};
  store.save_all({}, LeaseStep{.lease = lease});

  const auto report = store.save_all(
      {{.run_dir = dir, .origin_pod = "pod-a", .info = info("r1")},
       {.run_dir = temp_.path() / "runs-a" / "gone", .origin_pod = "pod-a", .info = info("gone")}},
      LeaseStep{.lease = lease, .release = true});
  ASSERT_TRUE(report.lease_error);
  EXPECT_NE(report.lease_error->find("not released"), std::string::npos) << *report.lease_error;
  EXPECT_TRUE(report.runs[1].error);
  EXPECT_EQ(report.runs[0].ref, RefOutcome::updated);
  EXPECT_EQ(store.remote().list(lease_ref("pod-a")).size(), 1u);
}

// Over a real server, whose update hook refuses one run's ref: the release
// went through with the others, and the lease is taken again at once.
TEST_F(CheckpointStoreTest, ARunTheServerRefusedTakesTheReleasedLeaseAgain) {
  git(temp_.path(), "init -q --bare results.git");
  const int port = free_port();
  const BackgroundProcess daemon(
      {"git", "daemon", "--reuseaddr", "--listen=127.0.0.1", "--port=" + std::to_string(port),
       "--base-path=" + temp_.path().string(), "--export-all", "--enable=receive-pack",
       temp_.path().string()},
      port);
  auto settings = config("a");
  settings.remote.url = "git://127.0.0.1:" + std::to_string(port) + "/results.git";
  CheckpointStore store(settings);
  const Lease lease{.pod = "pod-a", .until = now_plus(600)};
  store.save_all({}, LeaseStep{.lease = lease});
  write_file(remote() / "hooks" / "update",
             "#!/bin/sh\n[ \"$1\" = refs/heads/inflight/pod-a/r2 ] && exit 1\nexit 0\n");
  fs::permissions(remote() / "hooks" / "update", fs::perms::owner_all);

  const auto runs = temp_.path() / "runs-a";
  const auto report = store.save_all(
      {{.run_dir = make_run(runs, "r1", 1), .origin_pod = "pod-a", .info = info("r1")},
       {.run_dir = make_run(runs, "r2", 1), .origin_pod = "pod-a", .info = info("r2")}},
      LeaseStep{.lease = lease, .release = true});
  EXPECT_EQ(report.runs[0].ref, RefOutcome::updated);
  EXPECT_EQ(report.runs[1].ref, RefOutcome::refused);
  ASSERT_TRUE(report.lease_error);
  EXPECT_NE(report.lease_error->find("taken again"), std::string::npos) << *report.lease_error;
  const auto message = git(remote(), "log -1 --format=%B " + lease_ref("pod-a"));
  EXPECT_NE(message.find("Until: " + std::to_string(lease.until)), std::string::npos) << message;
}

// Once the owner is gone without finishing, the branch's copy replaces a
// handed-over one, whatever either holds.
TEST_F(CheckpointStoreTest, TheBranchReplacesAHandedOverCopy) {
  const auto runs_a = temp_.path() / "runs-a";
  const auto dir = make_run(runs_a, "r1", 1);
  CheckpointStore(config("a")).save(dir, "pod-a", info("r1"));
  auto stale = *read_run_params(dir);
  stale.attempts.push_back({.attempt = 2,
                            .pod = "pod-a",
                            .started_at = "t",
                            .ended_at = "t",
                            .exit_code = 143,
                            .outcome = "interrupted"});
  write_run_params(dir, stale);
  mark_handed_over(dir, "fenced");
  write_file(dir / "index.jsonl", "stale\n");
  const auto report = restore(CheckpointStore(config("a2")), runs_a, "pod-a");
  ASSERT_EQ(report.claimed.size(), 1u);
  const auto params = read_run_params(dir);
  ASSERT_TRUE(params);
  EXPECT_FALSE(params->handed_over);
  EXPECT_EQ(params->attempts.size(), 1u);
  EXPECT_EQ(read_file(dir / "index.jsonl"), "{\"test_id\":\"t001\"}\n{\"test_id\":\"t002\"}\n");
}

// An agent killed inside git_repository_init left HEAD.lock and no HEAD:
// every later checkpoint on that disk failed.
TEST_F(CheckpointStoreTest, ACacheThatIsNotARepositoryIsRecreated) {
  for (const auto& leftover : {"HEAD.lock", "file"}) {
    auto cfg = config(std::string("broken-") + leftover);
    if (std::string(leftover) == "file") {
      write_file(cfg.cache_dir, "not a repository");
    } else {
      fs::create_directories(cfg.cache_dir / "objects");
      write_file(cfg.cache_dir / leftover, "ref: refs/heads/master\n");
    }
    // A run of its own: the other cache's commit of the same run would be
    // another's tip (the same commit only when both fall in one second).
    const std::string run = std::string(leftover) == "file" ? "r2" : "r1";
    const auto dir = make_run(temp_.path() / ("runs-" + std::string(leftover)), run, 1);
    CheckpointStore store(cfg);
    EXPECT_TRUE(store.save(dir, "pod-a", info(run)).value()) << leftover;
    EXPECT_TRUE(fs::exists(cfg.cache_dir / "HEAD")) << leftover;
  }
}

// Another instance's commit on the branch: this pod's save and release are
// answered `rejected`, and the branch keeps the other's tip.
TEST_F(CheckpointStoreTest, ASaveOrReleaseOnAnotherInstancesTipIsRejected) {
  const auto dir_a = make_run(temp_.path() / "runs-a", "r1", 1);
  ASSERT_TRUE(CheckpointStore(config("a")).save(dir_a, "pod-a", info("r1")).value());
  const auto tip = trimmed(git(remote(), "rev-parse refs/heads/inflight/pod-a/r1"));
  const auto dir_b = make_run(temp_.path() / "runs-b", "r1", 2);
  CheckpointStore other(config("b"));
  const auto saved = other.save(dir_b, "pod-a", info("r1", CheckpointReason::periodic));
  ASSERT_FALSE(saved);
  EXPECT_EQ(saved.error().kind, Failure::rejected) << saved.error().message;
  const auto released = release_one(other, dir_b, "pod-a", info("r1", CheckpointReason::final));
  ASSERT_FALSE(released);
  EXPECT_EQ(released.error().kind, Failure::rejected) << released.error().message;
  EXPECT_EQ(trimmed(git(remote(), "rev-parse refs/heads/inflight/pod-a/r1")), tip);
}

TEST_F(CheckpointStoreTest, ACacheThatCannotBeCreatedIsACacheFailure) {
  auto cfg = config("a");
  write_file(temp_.path() / "blocker", "");
  cfg.cache_dir = temp_.path() / "blocker" / "cache.git";
  try {
    CheckpointStore store(cfg);
    FAIL() << "expected an error";
  } catch (const GitError& e) {
    EXPECT_EQ(e.kind(), Failure::cache) << e.what();
  }
}

TEST_F(CheckpointStoreTest, UnreachableRemoteThrowsAsUnreachable) {
  auto unreachable = config("a");
  unreachable.remote.url = "git://127.0.0.1:1/results.git";
  CheckpointStore store(unreachable);
  try {
    restore(std::move(store), temp_.path(), "pod-a");
    FAIL() << "expected an error";
  } catch (const GitError& e) {
    EXPECT_EQ(e.kind(), Failure::unreachable);
  }
}

}  // namespace
}  // namespace inflight::checkpoint::testing
