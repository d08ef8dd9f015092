// A snapshot leaves out what a restore would refuse, says what it left out,
// and fails a run dir still over the limits: what it makes always restores.
#include <fcntl.h>
#include <linux/capability.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "checkpoint/checkpoint_test_support.hpp"

namespace inflight::checkpoint::testing {
namespace {

constexpr TreeLimits kLimits{.max_bytes = 1 << 20, .max_files = 1000};

CheckpointInfo info() {
  return CheckpointInfo{"r-1", 1, CheckpointReason::shutdown, "pod-a", 0};
}

// A UNIX socket bound at `path`, left in the directory after it is closed.
void make_socket(const fs::path& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(path.string().size(), sizeof address.sun_path);
  std::strcpy(address.sun_path, path.c_str());
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ::close(fd);
}

// A file of `size` bytes that holds no data blocks: reading it would cost
// `size` bytes of zeros.
void make_sparse(const fs::path& path, off_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::ftruncate(fd, size), 0);
  ::close(fd);
}

// `levels` nested directories under `top`, each named d<level>; the deepest.
fs::path make_deep(const fs::path& top, int levels) {
  fs::path dir = top;
  for (int i = 1; i <= levels; ++i) dir /= "d" + std::to_string(i);
  fs::create_directories(dir);
  return dir;
}

std::string deep_path(const std::string& top, int levels) {
  std::string path = top;
  for (int i = 1; i <= levels; ++i) path += "/d" + std::to_string(i);
  return path;
}

// While it lives, this thread is subject to file permissions even as root: CAP_DAC_OVERRIDE and
// CAP_DAC_READ_SEARCH leave its effective set (they stay permitted, and come back at the end).
// A mode-000 entry is then as closed to the test as to serve running as a user.
class PermissionsApply {
 public:
  PermissionsApply() {
    EXPECT_EQ(::syscall(SYS_capget, &header_, saved_), 0);
    __user_cap_data_struct reduced[2] = {saved_[0], saved_[1]};
    reduced[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH));
    EXPECT_EQ(::syscall(SYS_capset, &header_, reduced), 0);
  }
  ~PermissionsApply() { ::syscall(SYS_capset, &header_, saved_); }
  PermissionsApply(const PermissionsApply&) = delete;
  PermissionsApply& operator=(const PermissionsApply&) = delete;

 private:
  __user_cap_header_struct header_{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct saved_[2]{};
};

class SnapshotRulesTest : public CheckpointTest {
 protected:
  void SetUp() override {
    repo_.emplace(cache_path());
    fs::create_directories(run_dir());
  }
  std::string ls_tree(const std::string& commit) {
    repo_->persist();
    return git(cache_path(), "ls-tree -r --name-only " + commit);
  }
  // The rule the snapshot gave for leaving out `path`, or "" when it kept it.
  static std::string rule_for(const RunSnapshotter& snapshotter, const std::string& path) {
    for (const auto& entry : snapshotter.left_out().named)
      if (entry.path == path) return entry.rule;
    return "";
  }

  std::optional<CacheRepo> repo_;
};

TEST_F(SnapshotRulesTest, WhatARestoreRefusesIsLeftOutNamedAndTheRestRestores) {
  write_file(run_dir() / "index.jsonl", "{\"a\":1}\n");
  write_file(run_dir() / "sub" / "keep.txt", "kept");
  write_file(run_dir() / "bad\xff.txt", "not UTF-8");
  write_file(make_deep(run_dir() / "deep", 200) / "bottom.txt", "too deep");
  make_sparse(run_dir() / "sparse.bin", off_t{2} << 30);
  ASSERT_EQ(::mkfifo((run_dir() / "pipe").c_str(), 0600), 0);
  make_socket(run_dir() / "sock");
  fs::create_symlink("/etc/passwd", run_dir() / "link");
  write_file(run_dir() / "sub" / ".GIT" / "config", "a repository");
  write_file(run_dir() / "x.inflight-chunks" / "000000", "a fake chunk tree");

  RunSnapshotter snapshotter(*repo_, {}, kLimits);
  const auto commit = snapshotter.snapshot(run_dir(), info(), std::nullopt);
  ASSERT_TRUE(commit);
  EXPECT_EQ(ls_tree(*commit), "index.jsonl\nsub/keep.txt\n");
  EXPECT_EQ(rule_for(snapshotter, "bad\\xff.txt"), "name is not UTF-8");
  EXPECT_EQ(rule_for(snapshotter, deep_path("deep", kMaxTreeDepth)),  // deep/ is the first
            "nested deeper than 64 directories");
  EXPECT_EQ(rule_for(snapshotter, "sparse.bin"),
            "file of 2147483648 bytes is over the byte limit of 1048576");
  EXPECT_EQ(rule_for(snapshotter, "pipe"), "FIFO");
  EXPECT_EQ(rule_for(snapshotter, "sock"), "socket");
  EXPECT_EQ(rule_for(snapshotter, "link"), "symbolic link");
  EXPECT_EQ(rule_for(snapshotter, "sub/.GIT"), "'.git' component");
  EXPECT_EQ(rule_for(snapshotter, "x.inflight-chunks"), "directory name ends in .inflight-chunks");
  EXPECT_EQ(snapshotter.left_out().named.size(), 8u);
  EXPECT_EQ(snapshotter.left_out().unnamed, 0u);
  // Judged by lstat alone: only the two kept files were opened.
  EXPECT_EQ(snapshotter.last_stats().files_read, 2u);
  EXPECT_EQ(snapshotter.last_stats().bytes_read, std::strlen("{\"a\":1}\n") + 4);

  const fs::path restored = temp_.path() / "restored";
  materialize(*repo_, *commit, restored, kLimits);
  EXPECT_EQ(read_file(restored / "index.jsonl"), "{\"a\":1}\n");
  EXPECT_EQ(read_file(restored / "sub" / "keep.txt"), "kept");
}

// A directory that is a link to one outside the run dir is left out: nothing
// below it is listed or read.
TEST_F(SnapshotRulesTest, ADirectoryLinkIsLeftOutAndNothingIsReadThroughIt) {
  write_file(run_dir() / "keep.txt", "k");
  write_file(temp_.path() / "outside" / "secret", "serve's secret");
  fs::create_directory_symlink(temp_.path() / "outside", run_dir() / "a");
  RunSnapshotter snapshotter(*repo_, {}, kLimits);
  const auto commit = snapshotter.snapshot(run_dir(), info(), std::nullopt);
  ASSERT_TRUE(commit);
  EXPECT_EQ(ls_tree(*commit), "keep.txt\n");
  EXPECT_EQ(rule_for(snapshotter, "a"), "symbolic link");
  EXPECT_EQ(snapshotter.last_stats().files_read, 1u);
}

// Names the rules let through but libgit2 will not put in a tree: left out
// too, rather than failing the whole checkpoint.
TEST_F(SnapshotRulesTest, NamesGitRefusesInATreeAreLeftOut) {
  write_file(run_dir() / "keep.txt", "k");
  write_file(run_dir() / "GIT~1", "an NTFS short name of .git");
  RunSnapshotter snapshotter(*repo_, {}, kLimits);
  const auto commit = snapshotter.snapshot(run_dir(), info(), std::nullopt);
  ASSERT_TRUE(commit);
  EXPECT_EQ(ls_tree(*commit), "keep.txt\n");
  EXPECT_EQ(rule_for(snapshotter, "GIT~1"), "git refuses the name");
}

TEST_F(SnapshotRulesTest, ExcludedEntriesAreNotReportedAsLeftOut) {
  write_file(run_dir() / "keep.txt", "k");
  fs::create_symlink("/etc/passwd", run_dir() / "id_rsa");
  RunSnapshotter snapshotter(*repo_, {"id_rsa*"}, kLimits);
  ASSERT_TRUE(snapshotter.snapshot(run_dir(), info(), std::nullopt));
  EXPECT_TRUE(snapshotter.left_out().empty());
}

TEST_F(SnapshotRulesTest, EachSnapshotReportsOnlyWhatItLeftOut) {
  write_file(run_dir() / "keep.txt", "k");
  ASSERT_EQ(::mkfifo((run_dir() / "pipe").c_str(), 0600), 0);
  RunSnapshotter snapshotter(*repo_, {}, kLimits);
  const auto first = snapshotter.snapshot(run_dir(), info(), std::nullopt);
  EXPECT_EQ(snapshotter.left_out().named.size(), 1u);
  fs::remove(run_dir() / "pipe");
  ASSERT_TRUE(snapshotter.snapshot(run_dir(), info(), first));
  EXPECT_TRUE(snapshotter.left_out().empty());
}

TEST_F(SnapshotRulesTest, ADirStillOverTheFileLimitFailsOverLimit) {
  for (int i = 0; i < 6; ++i) write_file(run_dir() / ("f" + std::to_string(i)), "x");
  ASSERT_EQ(::mkfifo((run_dir() / "pipe").c_str(), 0600), 0);
  RunSnapshotter fits(*repo_, {}, {.max_bytes = 1 << 20, .max_files = 6});
  EXPECT_TRUE(fits.snapshot(run_dir(), info(), std::nullopt));  // the FIFO does not count

  write_file(run_dir() / "f6", "x");
  RunSnapshotter over(*repo_, {}, {.max_bytes = 1 << 20, .max_files = 6});
  try {
    over.snapshot(run_dir(), info(), std::nullopt);
    FAIL() << "expected over_limit";
  } catch (const GitError& error) {
    EXPECT_EQ(error.kind(), Failure::over_limit);
    EXPECT_NE(std::string(error.what()).find("more than 6 files"), std::string::npos)
        << error.what();
  }
}

TEST_F(SnapshotRulesTest, ADirStillOverTheByteLimitFailsBeforeReadingIt) {
  make_sparse(run_dir() / "a.bin", 600);
  make_sparse(run_dir() / "b.bin", 600);
  RunSnapshotter snapshotter(*repo_, {}, {.max_bytes = 1000, .max_files = 100});
  try {
    snapshotter.snapshot(run_dir(), info(), std::nullopt);
    FAIL() << "expected over_limit";
  } catch (const GitError& error) {
    EXPECT_EQ(error.kind(), Failure::over_limit);
    EXPECT_NE(std::string(error.what()).find("larger than the limit of 1000 bytes"),
              std::string::npos)
        << error.what();
  }
  EXPECT_LE(snapshotter.last_stats().bytes_read, 600u);  // the second file was never read
}

// A chunked file 64 directories down: its chunk tree is neither a 65th
// level nor 7 more files, in the snapshot and in the restore alike.
TEST_F(SnapshotRulesTest, ChunkTreesCountNeitherTowardDepthNorFiles) {
  const fs::path bottom = make_deep(run_dir(), kMaxTreeDepth);
  write_file(bottom / "big.jsonl", std::string(200'000, 'x'));  // 7 chunks
  const TreeLimits limits{.max_bytes = 1 << 20, .max_files = kMaxTreeDepth + 1};
  RunSnapshotter snapshotter(*repo_, {}, limits);
  const auto commit = snapshotter.snapshot(run_dir(), info(), std::nullopt);
  ASSERT_TRUE(commit);
  EXPECT_TRUE(snapshotter.left_out().empty());
  EXPECT_NE(ls_tree(*commit).find("big.jsonl.inflight-chunks/000000/000006"), std::string::npos);

  const fs::path restored = temp_.path() / "restored";
  materialize(*repo_, *commit, restored, limits);
  EXPECT_EQ(fs::file_size(restored / fs::relative(bottom, run_dir()) / "big.jsonl"), 200'000u);
}

// A child can chmod 000 what it made. What we may not read keeps the version the last checkpoint
// saved (a file, a chunked file, a whole directory); what was never saved is left out; both are
// named; the rest of the run is saved as it is now.
TEST_F(SnapshotRulesTest, AnEntryWeMayNotReadKeepsItsLastSavedVersion) {
  write_file(run_dir() / "index.jsonl", "1\n");
  write_file(run_dir() / "secret" / "notes.txt", "saved once");
  write_file(run_dir() / "locked.txt", "saved too");
  write_file(run_dir() / "big.jsonl", std::string(200'000, 'y'));  // chunked
  RunSnapshotter snapshotter(*repo_, {}, kLimits);
  const auto first = snapshotter.snapshot(run_dir(), info(), std::nullopt);
  ASSERT_TRUE(first);

  write_file(run_dir() / "index.jsonl", "1\n2\n");
  write_file(run_dir() / "secret" / "notes.txt", "changed since");
  write_file(run_dir() / "big.jsonl", "shorter now");
  write_file(run_dir() / "new" / "never.txt", "never saved");
  const std::vector<std::string> closed = {"secret", "locked.txt", "big.jsonl", "new"};
  for (const auto& name : closed) ASSERT_EQ(::chmod((run_dir() / name).c_str(), 0), 0);
  std::optional<std::string> second;
  {
    const PermissionsApply as_a_user;
    second = snapshotter.snapshot(run_dir(), info(), first);
  }
  for (const auto& name : closed) ::chmod((run_dir() / name).c_str(), 0700);
  ASSERT_TRUE(second);

  const std::string kept = "; its last saved version is kept";
  for (const auto* name : {"secret", "locked.txt", "big.jsonl"}) {
    const auto rule = rule_for(snapshotter, name);
    EXPECT_TRUE(rule.starts_with("open ")) << rule;
    EXPECT_NE(rule.find("Permission denied" + kept), std::string::npos) << rule;
  }
  EXPECT_NE(rule_for(snapshotter, "new").find("Permission denied; never saved before"),
            std::string::npos)
      << rule_for(snapshotter, "new");
  const fs::path restored = temp_.path() / "restored";
  materialize(*repo_, *second, restored, kLimits);
  EXPECT_EQ(read_file(restored / "index.jsonl"), "1\n2\n");
  EXPECT_EQ(read_file(restored / "secret" / "notes.txt"), "saved once");
  EXPECT_EQ(read_file(restored / "locked.txt"), "saved too");
  EXPECT_EQ(fs::file_size(restored / "big.jsonl"), 200'000u);
  EXPECT_FALSE(fs::exists(restored / "new"));
}

// The last checkpoint is a branch tip anyone with push access may have written. A directory we may
// not read keeps its last saved version only if that holds files alone: a gitlink (what layout 2's
// markers are made of) is no run's data, and is not carried into the next checkpoint.
TEST_F(SnapshotRulesTest, ALastSavedVersionHoldingAGitlinkIsNotKept) {
  write_file(run_dir() / "index.jsonl", "1\n");
  write_file(run_dir() / "secret" / "notes.txt", "saved once");
  RunSnapshotter snapshotter(*repo_, {}, kLimits);
  const auto first = snapshotter.snapshot(run_dir(), info(), std::nullopt);
  ASSERT_TRUE(first);
  repo_->persist();
  const auto notes = trimmed(git(cache_path(), "rev-parse " + *first + ":secret/notes.txt"));
  write_file(temp_.path() / "secret.tree",
             "100644 blob " + notes + "\tnotes.txt\n160000 commit " + *first + "\tsub\n");
  const auto secret =
      trimmed(git(cache_path(), "mktree < '" + (temp_.path() / "secret.tree").string() + "'"));
  std::string root = git(cache_path(), "ls-tree " + *first);
  const auto at = root.find("\tsecret\n");
  ASSERT_NE(at, std::string::npos) << root;
  root.replace(at - 40, 40, secret);
  write_file(temp_.path() / "root.tree", root);
  const auto tree =
      trimmed(git(cache_path(), "mktree < '" + (temp_.path() / "root.tree").string() + "'"));
  const auto hostile =
      trimmed(git(cache_path(), "commit-tree -m hostile -p " + *first + " " + tree));

  ASSERT_EQ(::chmod((run_dir() / "secret").c_str(), 0), 0);
  std::optional<std::string> second;
  {
    const PermissionsApply as_a_user;
    second = snapshotter.snapshot(run_dir(), info(), hostile);
  }
  ::chmod((run_dir() / "secret").c_str(), 0700);
  ASSERT_TRUE(second);
  EXPECT_NE(rule_for(snapshotter, "secret").find("holds what no checkpoint writes"),
            std::string::npos)
      << rule_for(snapshotter, "secret");
  EXPECT_EQ(ls_tree(*second).find("secret"), std::string::npos) << ls_tree(*second);
}

// The kept versions count toward the restore limits as read ones do: a directory whose name only
// contains the chunk suffix is a directory, its files entries.
TEST_F(SnapshotRulesTest, AKeptVersionCountsTowardTheLimits) {
  for (int i = 0; i < 5; ++i)
    write_file(run_dir() / "dir.inflight-chunks.d" / std::to_string(i), "x");
  const TreeLimits limits{.max_bytes = 1 << 20, .max_files = 8};
  RunSnapshotter snapshotter(*repo_, {}, limits);
  const auto first = snapshotter.snapshot(run_dir(), info(), std::nullopt);
  ASSERT_TRUE(first);  // 6 entries
  for (int i = 0; i < 3; ++i) write_file(run_dir() / std::to_string(i), "y");
  ASSERT_EQ(::chmod((run_dir() / "dir.inflight-chunks.d").c_str(), 0), 0);
  try {
    const PermissionsApply as_a_user;
    snapshotter.snapshot(run_dir(), info(), first);
    ADD_FAILURE() << "9 entries passed a limit of 8";
  } catch (const GitError& e) {
    EXPECT_EQ(e.kind(), Failure::over_limit) << e.what();
  }
  ::chmod((run_dir() / "dir.inflight-chunks.d").c_str(), 0700);
}

}  // namespace
}  // namespace inflight::checkpoint::testing
