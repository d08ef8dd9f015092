// Layout 2's marker commits: git gives their bytes the ids we compute, they
// pass git's strictest check, and nothing but the run id and status moves them.
#include "git/markers.hpp"

#include <gtest/gtest.h>

#include "checkpoint/checkpoint_test_support.hpp"
#include "git/git_error.hpp"
#include "git/git_handle.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"

namespace inflight::checkpoint::testing {
namespace {

TEST(Markers, GitGivesTheirBytesTheSameIdsAndFindsThemSound) {
  const TempDir dir;
  const auto repo = dir.path() / "server.git";
  run("git init -q --bare '" + repo.string() + "'");
  const auto published = published_marker("r-1");
  const auto status = status_marker("r-1", "succeeded");
  for (const auto& marker : {published, status, archive_genesis()}) {
    write_file(dir.path() / "marker", marker);
    const auto id = trimmed(
        git(repo, "hash-object -w -t commit --stdin < '" + (dir.path() / "marker").string() + "'"));
    EXPECT_EQ(id, oid_hex(marker_id(marker))) << marker;
  }
  git(repo, "hash-object -w -t tree /dev/null");
  run("git -C '" + repo.string() + "' fsck --strict --no-dangling");
  const auto status_id = oid_hex(marker_id(status));
  EXPECT_EQ(trimmed(git(repo, "rev-parse " + status_id + "^")), oid_hex(marker_id(published)));
  EXPECT_EQ(git(repo, "log -1 --format=%B " + status_id), "inflight published r-1 succeeded\n\n");
}

TEST(Markers, OnlyTheRunIdAndTheStatusMoveThem) {
  EXPECT_EQ(published_marker("r-1"), published_marker("r-1"));
  EXPECT_NE(published_marker("r-1"), published_marker("r-2"));
  EXPECT_NE(status_marker("r-1", "succeeded"), status_marker("r-1", "failed"));
  EXPECT_NE(archive_genesis(), published_marker("r-1"));
  // Words that would break a commit's lines make no marker.
  EXPECT_THROW(published_marker("r-1\nparent x"), GitError);
  EXPECT_THROW(status_marker("r-1", "ok\nparent"), GitError);
  EXPECT_THROW(status_marker("r-1", ""), GitError);
  EXPECT_THROW(status_marker("r-1", std::string(33, 'a')), GitError);
}

TEST(Markers, AWrittenMarkerIsACommit) {
  const GitLibrary library;
  const TempDir dir;
  git_repository* raw = nullptr;
  ASSERT_EQ(git_repository_init(&raw, (dir.path() / "push.git").c_str(), 1), 0);
  const RepositoryHandle repo(raw);
  const auto id = write_marker(repo.get(), status_marker("r-1", "failed"));
  const auto commit = lookup_commit(repo.get(), id);
  ASSERT_EQ(git_commit_parentcount(commit.get()), 1u);
  EXPECT_EQ(oid_hex(*git_commit_parent_id(commit.get(), 0)),
            oid_hex(marker_id(published_marker("r-1"))));
  EXPECT_EQ(std::string(git_commit_message(commit.get())), "inflight published r-1 failed\n");
  EXPECT_EQ(git_tree_entrycount(tree_of(commit.get()).get()), 0u);
}

}  // namespace
}  // namespace inflight::checkpoint::testing
