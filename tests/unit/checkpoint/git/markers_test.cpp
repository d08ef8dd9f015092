// Layout 2's markers: git gives their bytes the ids we compute, they pass git's
// strictest check, and nothing but the run id and status moves them.
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
  for (const auto& marker : {published, status, archive_genesis(), archive_known()}) {
    write_file(dir.path() / "marker", marker.bytes);
    const std::string type = marker.type == GIT_OBJECT_TREE ? "tree" : "commit";
    const auto id = trimmed(git(repo, "hash-object -w -t " + type + " --stdin < '" +
                                          (dir.path() / "marker").string() + "'"));
    EXPECT_EQ(id, oid_hex(marker_id(marker))) << marker.bytes;
  }
  git(repo, "hash-object -w -t tree /dev/null");
  run("git -C '" + repo.string() + "' fsck --strict --no-dangling");
  const auto genesis = oid_hex(marker_id(archive_genesis()));
  const auto published_id = oid_hex(marker_id(published));
  EXPECT_EQ(git(repo, "ls-tree " + oid_hex(marker_id(status))),
            "040000 tree " + published_id + "\tsucceeded\n");
  EXPECT_EQ(git(repo, "ls-tree " + published_id),
            "160000 commit " + genesis + "\tinflight published r-1\n");
  EXPECT_EQ(git(repo, "log -1 --format=%B " + genesis), "inflight archive\n\n");
  EXPECT_EQ(git(repo, "ls-tree " + oid_hex(marker_id(archive_known()))),
            "160000 commit " + genesis + "\tinflight archive\n");
}

TEST(Markers, OnlyTheRunIdAndTheStatusMoveThem) {
  const auto id = [](const Marker& marker) { return oid_hex(marker_id(marker)); };
  EXPECT_EQ(id(published_marker("r-1")), id(published_marker("r-1")));
  EXPECT_NE(id(published_marker("r-1")), id(published_marker("r-2")));
  EXPECT_NE(id(status_marker("r-1", "succeeded")), id(status_marker("r-1", "failed")));
  EXPECT_NE(id(status_marker("r-1", "failed")), id(status_marker("r-2", "failed")));
  // Words that would break a tree entry's name make no marker.
  EXPECT_THROW(published_marker(std::string("r-1\0x", 5)), GitError);
  EXPECT_THROW(published_marker("r-1/x"), GitError);
  EXPECT_THROW(status_marker("r-1", "ok/x"), GitError);
  EXPECT_THROW(status_marker("r-1", ""), GitError);
  EXPECT_THROW(status_marker("r-1", std::string(33, 'a')), GitError);
}

// A written status marker is served with the publish marker it holds: write_marker() of each.
TEST(Markers, AWrittenMarkerIsWhatItsIdNames) {
  const GitLibrary library;
  const TempDir dir;
  git_repository* raw = nullptr;
  ASSERT_EQ(git_repository_init(&raw, (dir.path() / "push.git").c_str(), 1), 0);
  const RepositoryHandle repo(raw);
  EXPECT_EQ(oid_hex(write_marker(repo.get(), published_marker("r-1"))),
            oid_hex(marker_id(published_marker("r-1"))));
  const auto id = write_marker(repo.get(), status_marker("r-1", "failed"));
  git_tree* tree = nullptr;
  ASSERT_EQ(git_tree_lookup(&tree, repo.get(), &id), 0);
  const TreeHandle status(tree);
  ASSERT_EQ(git_tree_entrycount(status.get()), 1u);
  EXPECT_EQ(oid_hex(*git_tree_entry_id(git_tree_entry_byname(status.get(), "failed"))),
            oid_hex(marker_id(published_marker("r-1"))));
  const auto genesis = lookup_commit(repo.get(), write_marker(repo.get(), archive_genesis()));
  EXPECT_EQ(git_tree_entrycount(tree_of(genesis.get()).get()), 0u);
}

}  // namespace
}  // namespace inflight::checkpoint::testing
