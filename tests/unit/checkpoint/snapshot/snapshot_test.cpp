#include <sys/stat.h>

#include "checkpoint/checkpoint_test_support.hpp"

namespace inflight::checkpoint::testing {
namespace {

const std::vector<std::string> kDefaultExcludes{".env", "*.pem", "*.key", "id_rsa*"};

CheckpointInfo info(CheckpointReason reason, int attempt = 1) {
  return CheckpointInfo{"r-1", attempt, reason, "pod-a", 42};
}

class SnapshotTest : public CheckpointTest {
 protected:
  void SetUp() override {
    repo_.emplace(cache_path());
    snapshotter_.emplace(*repo_, kDefaultExcludes);
    fs::create_directories(run_dir());
  }
  std::optional<std::string> snap(CheckpointReason reason,
                                  const std::optional<std::string>& parent = std::nullopt) {
    return snapshotter_->snapshot(run_dir(), info(reason), parent);
  }
  // The git program reads the cache from disk: what the snapshots made goes there first.
  std::string git_cache(const std::string& args) {
    repo_->persist();
    return git(cache_path(), args);
  }
  std::string ls_tree(const std::string& commit) {
    return git_cache("ls-tree -r --name-only " + commit);
  }

  std::optional<CacheRepo> repo_;
  std::optional<RunSnapshotter> snapshotter_;
};

TEST_F(SnapshotTest, CommitCarriesMessageTrailersAuthorAndParent) {
  write_file(run_dir() / "index.jsonl", "{\"a\":1}\n");
  const auto first = snap(CheckpointReason::periodic);
  ASSERT_TRUE(first);
  write_file(run_dir() / "index.jsonl", "{\"a\":1}\n{\"a\":2}\n");
  const auto second = snap(CheckpointReason::shutdown, first);
  ASSERT_TRUE(second);

  const auto commits = history(*repo_, *second);
  ASSERT_EQ(commits.size(), 2u);
  EXPECT_EQ(commits[0].oid, *second);
  EXPECT_EQ(commits[1].oid, *first);
  EXPECT_EQ(commits[0].message,
            "inflight checkpoint r-1 attempt 1 (shutdown)\n\nInflight-Pod: pod-a\n"
            "Inflight-Attempt: 1\nInflight-Records: 42\n");
  EXPECT_GT(commits[0].time, 1'700'000'000);
  EXPECT_EQ(trimmed(git_cache("log -1 --format=%an/%ae/%cn/%ce " + *second)),
            "inflight/inflight@localhost/inflight/inflight@localhost");
  EXPECT_EQ(read_file_at(*repo_, *second, "index.jsonl", 1 << 30), "{\"a\":1}\n{\"a\":2}\n");
}

TEST_F(SnapshotTest, ExcludeGlobsMatchBaseNameAndRelativePath) {
  RunSnapshotter snapshotter(*repo_, {".env", "*.pem", "*.key", "id_rsa*", "logs/*.tmp"});
  for (const char* name : {".env", "tls.pem", "sub/deep.key", "id_rsa", "id_rsa.pub", "logs/x.tmp",
                           "keep.txt", "sub/keep.json", "other/x.tmp"}) {
    write_file(run_dir() / name, "x");
  }
  const auto commit = snapshotter.snapshot(run_dir(), info(CheckpointReason::manual), std::nullopt);
  ASSERT_TRUE(commit);
  EXPECT_EQ(ls_tree(*commit), "keep.txt\nother/x.tmp\nsub/keep.json\n");
}

TEST_F(SnapshotTest, SymlinksAreSkippedWithAWarningAndEmptyDirsOmitted) {
  write_file(run_dir() / "real.txt", "real");
  fs::create_symlink("/etc/passwd", run_dir() / "link");
  fs::create_directories(run_dir() / "empty" / "nested");
  const auto commit = snap(CheckpointReason::manual);
  ASSERT_TRUE(commit);
  EXPECT_EQ(ls_tree(*commit), "real.txt\n");
  ASSERT_EQ(snapshotter_->left_out().named.size(), 1u);
  EXPECT_EQ(snapshotter_->left_out().named[0].path, "link");
  EXPECT_EQ(snapshotter_->left_out().named[0].rule, "symbolic link");
}

TEST_F(SnapshotTest, AnEmptyFileIsSavedAndRestoredEmpty) {
  write_file(run_dir() / "index.jsonl", "");
  write_file(run_dir() / "sub" / "empty.log", "");
  const auto commit = snap(CheckpointReason::manual);
  ASSERT_TRUE(commit);
  EXPECT_EQ(ls_tree(*commit), "index.jsonl\nsub/empty.log\n");
  EXPECT_EQ(read_file_at(*repo_, *commit, "index.jsonl", 1 << 30), "");

  fs::remove(run_dir() / "index.jsonl");
  const auto without = snap(CheckpointReason::periodic, commit);
  ASSERT_TRUE(without);
  EXPECT_EQ(ls_tree(*without), "sub/empty.log\n");
  write_file(run_dir() / "index.jsonl", "");
  const auto again = snap(CheckpointReason::periodic, without);
  ASSERT_TRUE(again);
  EXPECT_EQ(ls_tree(*again), "index.jsonl\nsub/empty.log\n");
}

TEST_F(SnapshotTest, ExecutableBitBecomesMode100755) {
  write_file(run_dir() / "run.sh", "#!/bin/sh\n");
  write_file(run_dir() / "data.txt", "d");
  fs::permissions(run_dir() / "run.sh", fs::perms::owner_exec, fs::perm_options::add);
  const auto commit = snap(CheckpointReason::manual);
  ASSERT_TRUE(commit);
  const std::string tree = git_cache("ls-tree " + *commit);
  EXPECT_NE(tree.find("100755 blob"), std::string::npos);
  EXPECT_NE(tree.find("100644 blob"), std::string::npos);
}

TEST_F(SnapshotTest, UnchangedRunDirReadsNoFileAndMakesNoCommit) {
  write_file(run_dir() / "a.txt", "a");
  write_file(run_dir() / "sub" / "b.txt", std::string(200'000, 'b'));
  const auto first = snap(CheckpointReason::periodic);
  ASSERT_TRUE(first);
  EXPECT_EQ(snapshotter_->last_stats().files_read, 2u);

  EXPECT_EQ(snap(CheckpointReason::periodic, first), std::nullopt);
  EXPECT_EQ(snapshotter_->last_stats().files_unchanged, 2u);
  EXPECT_EQ(snapshotter_->last_stats().files_read, 0u);
  EXPECT_EQ(snapshotter_->last_stats().bytes_read, 0u);
}

TEST_F(SnapshotTest, ClaimCommitsEvenWhenNothingChanged) {
  write_file(run_dir() / "a.txt", "a");
  const auto first = snap(CheckpointReason::shutdown);
  ASSERT_TRUE(first);
  const auto claim = snap(CheckpointReason::claim, first);
  ASSERT_TRUE(claim);
  EXPECT_NE(*claim, *first);
  EXPECT_EQ(history(*repo_, *claim).size(), 2u);
}

TEST_F(SnapshotTest, DeletedFileLeavesTheTree) {
  write_file(run_dir() / "a.txt", "a");
  write_file(run_dir() / "b.txt", "b");
  const auto first = snap(CheckpointReason::periodic);
  fs::remove(run_dir() / "b.txt");
  const auto second = snap(CheckpointReason::periodic, first);
  ASSERT_TRUE(second);
  EXPECT_EQ(ls_tree(*second), "a.txt\n");
}

std::string big_content(std::size_t size) {
  std::string content(size, '\0');
  for (std::size_t i = 0; i < size; ++i)
    content[i] = static_cast<char>('a' + (i * 7 + i / 13) % 26);
  return content;
}

TEST_F(SnapshotTest, BigFileIsChunkedAndRoundTripsByteIdentical) {
  std::string content = big_content(5 * 1024 * 1024 + 123);
  write_file(run_dir() / "index.jsonl", content);
  auto commit = snap(CheckpointReason::periodic);
  ASSERT_TRUE(commit);
  const std::string listing = ls_tree(*commit);
  EXPECT_NE(listing.find("index.jsonl.inflight-chunks/000000/000000\n"), std::string::npos);
  EXPECT_NE(listing.find("index.jsonl.inflight-chunks/000000/000160\n"), std::string::npos);

  for (int i = 0; i < 3; ++i) {
    const std::string more = "{\"test_id\":\"t" + std::to_string(i) + "\"}\n";
    append_file(run_dir() / "index.jsonl", more);
    content += more;
    commit = snap(CheckpointReason::periodic, commit);
    ASSERT_TRUE(commit);
  }
  EXPECT_EQ(read_file_at(*repo_, *commit, "index.jsonl", 1 << 30), content);
  const fs::path restored = temp_.path() / "restored";
  materialize(*repo_, *commit, restored, {});
  EXPECT_EQ(read_file(restored / "index.jsonl"), content);
}

// 9 MiB is two chunk groups: an append rewrites the last chunk, the last
// group, the chunk tree, the root tree and the commit, never the first group.
TEST_F(SnapshotTest, AppendingToABigFileWritesOnlyTheTail) {
  write_file(run_dir() / "index.jsonl", big_content(9 * 1024 * 1024 + 1000));
  const auto first = snap(CheckpointReason::periodic);
  ASSERT_TRUE(first);
  EXPECT_NE(ls_tree(*first).find("index.jsonl.inflight-chunks/000001/000032\n"), std::string::npos);
  repo_->persist();
  const std::size_t before = RawRepo(cache_path()).object_count();

  std::string lines;
  for (int i = 0; i < 50; ++i)
    lines += "{\"test_id\":\"t" + std::to_string(i) + "\",\"score\":1}\n";
  append_file(run_dir() / "index.jsonl", lines);
  const auto second = snap(CheckpointReason::periodic, first);
  ASSERT_TRUE(second);

  // Last chunk (maybe two), last group, chunk tree, root tree, commit.
  repo_->persist();
  EXPECT_LE(RawRepo(cache_path()).object_count() - before, 6u);
  EXPECT_GE(RawRepo(cache_path()).object_count() - before, 5u);
  EXPECT_LT(snapshotter_->last_stats().bytes_read, 2 * 32 * 1024u);
  EXPECT_EQ(read_file_at(*repo_, *second, "index.jsonl", 1 << 30),
            big_content(9 * 1024 * 1024 + 1000) + lines);
}

// Objects stay in memory until persist(), which writes them as one pack:
// never a loose object.
TEST_F(SnapshotTest, ObjectsReachTheDiskAsOnePackOnlyWhenPersisted) {
  write_file(run_dir() / "a.txt", "a");
  write_file(run_dir() / "sub/b.txt", "b");
  const auto commit = snap(CheckpointReason::shutdown);
  ASSERT_TRUE(commit);
  EXPECT_TRUE(repo_->contains(*commit));
  EXPECT_EQ(RawRepo(cache_path()).object_count(), 0u);
  repo_->persist();
  EXPECT_EQ(RawRepo(cache_path()).object_count(), 5u);  // 2 blobs, 2 trees, 1 commit
  EXPECT_EQ(trimmed(run("find '" + (cache_path() / "objects").string() +
                        "' -type f -name '*.pack' | wc -l")),
            "1");
  EXPECT_EQ(trimmed(run("find '" + (cache_path() / "objects").string() +
                        "' -type f -regex '.*/objects/[0-9a-f][0-9a-f]/.*' | wc -l")),
            "0");
  repo_->persist();  // nothing new: no second pack
  EXPECT_EQ(trimmed(run("find '" + (cache_path() / "objects").string() +
                        "' -type f -name '*.pack' | wc -l")),
            "1");
  EXPECT_TRUE(CacheRepo(cache_path()).contains(*commit));
}

// The stat cache outlives the process that built it (each periodic save is
// an agent of its own), and a kept one that does not check out is ignored.
TEST_F(SnapshotTest, TheNextProcessReadsOnlyWhatChanged) {
  write_file(run_dir() / "index.jsonl", big_content(5 * 1024 * 1024 + 1000));
  write_file(run_dir() / "small.txt", "s");
  const auto first = snap(CheckpointReason::periodic);
  ASSERT_TRUE(first);
  repo_->persist();
  snapshotter_->keep_stat_cache();
  append_file(run_dir() / "index.jsonl", "{\"test_id\":\"t\"}\n");
  {
    CacheRepo next(cache_path());
    RunSnapshotter snapshotter(next, kDefaultExcludes);
    ASSERT_TRUE(snapshotter.snapshot(run_dir(), info(CheckpointReason::periodic), first));
    EXPECT_EQ(snapshotter.last_stats().files_unchanged, 1u);
    EXPECT_LT(snapshotter.last_stats().bytes_read, 2 * 32 * 1024u);
  }
  for (const auto& kept : fs::directory_iterator(cache_path() / "inflight-stat"))
    write_file(kept.path(), "{\"format\":1,\"run_dir\":");
  CacheRepo next(cache_path());
  RunSnapshotter snapshotter(next, kDefaultExcludes);
  ASSERT_TRUE(snapshotter.snapshot(run_dir(), info(CheckpointReason::manual), first));
  EXPECT_EQ(snapshotter.last_stats().files_unchanged, 0u);
  EXPECT_GT(snapshotter.last_stats().bytes_read, 5u * 1024 * 1024);
}

TEST_F(SnapshotTest, MissingParentIsNotFound) {
  write_file(run_dir() / "a.txt", "a");
  try {
    snap(CheckpointReason::periodic, std::string(40, 'a'));
    FAIL() << "expected GitError";
  } catch (const GitError& error) {
    EXPECT_EQ(error.kind(), Failure::not_found);
  }
}

}  // namespace
}  // namespace inflight::checkpoint::testing
