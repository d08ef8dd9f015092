// The rules a checkpoint tree meets, one kind of entry at a time: the same
// answers serve the snapshot walk (leave it out) and a restore (refuse it).
#include "inflight/checkpoint/tree_rules.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

namespace inflight::checkpoint {
namespace {

TEST(TreeRules, NamesARestoreRefusesAreRefused) {
  EXPECT_EQ(name_refusal(""), "empty, '.' or '..' name");
  EXPECT_EQ(name_refusal("."), "empty, '.' or '..' name");
  EXPECT_EQ(name_refusal(".."), "empty, '.' or '..' name");
  EXPECT_EQ(name_refusal("a/b"), "name contains '/'");
  EXPECT_EQ(name_refusal(".git"), "'.git' component");
  EXPECT_EQ(name_refusal(".GiT"), "'.git' component");
  EXPECT_EQ(name_refusal("bad\xff.txt"), "name is not UTF-8");
  EXPECT_EQ(name_refusal("\xc3"), "name is not UTF-8");  // a truncated sequence
  EXPECT_EQ(name_refusal(std::string(256, 'n')), "name longer than 255 bytes");
  EXPECT_EQ(name_refusal(std::string(255, 'n')), std::nullopt);
}

TEST(TreeRules, OrdinaryNamesPass) {
  for (const char* name :
       {"index.jsonl", "git", ".gitignore", ".git2", "r\xc3\xa9sum\xc3\xa9.txt", "...", " spaced "})
    EXPECT_EQ(name_refusal(name), std::nullopt) << name;
}

TEST(TreeRules, OnlyFilesAndDirectoriesAreKept) {
  EXPECT_EQ(kind_refusal(EntryKind::file), std::nullopt);
  EXPECT_EQ(kind_refusal(EntryKind::directory), std::nullopt);
  EXPECT_EQ(kind_refusal(EntryKind::symlink), "symbolic link");
  EXPECT_EQ(kind_refusal(EntryKind::gitlink), "gitlink (submodule)");
  EXPECT_EQ(kind_refusal(EntryKind::fifo), "FIFO");
  EXPECT_EQ(kind_refusal(EntryKind::socket), "socket");
  EXPECT_EQ(kind_refusal(EntryKind::device), "device");
  EXPECT_EQ(kind_refusal(EntryKind::other), "unsupported file mode");
}

TEST(TreeRules, LstatModesMapToTheirKinds) {
  EXPECT_EQ(entry_kind_of_mode(S_IFREG | 0644), EntryKind::file);
  EXPECT_EQ(entry_kind_of_mode(S_IFDIR | 0755), EntryKind::directory);
  EXPECT_EQ(entry_kind_of_mode(S_IFLNK | 0777), EntryKind::symlink);
  EXPECT_EQ(entry_kind_of_mode(S_IFIFO | 0600), EntryKind::fifo);
  EXPECT_EQ(entry_kind_of_mode(S_IFSOCK | 0600), EntryKind::socket);
  EXPECT_EQ(entry_kind_of_mode(S_IFCHR | 0600), EntryKind::device);
  EXPECT_EQ(entry_kind_of_mode(S_IFBLK | 0600), EntryKind::device);
}

TEST(TreeRules, SixtyFourDirectoriesDeepIsTheLimit) {
  EXPECT_EQ(depth_refusal(1), std::nullopt);
  EXPECT_EQ(depth_refusal(kMaxTreeDepth), std::nullopt);
  EXPECT_EQ(depth_refusal(kMaxTreeDepth + 1), "nested deeper than 64 directories");
}

TEST(TreeRules, OneFileOverTheByteLimitIsRefusedAlone) {
  const TreeLimits limits{.max_bytes = 1000, .max_files = 10};
  EXPECT_EQ(file_size_refusal(1000, limits), std::nullopt);
  EXPECT_EQ(file_size_refusal(1001, limits), "file of 1001 bytes is over the byte limit of 1000");
}

TEST(TreeRules, ATallyIsOverWhenItsFilesOrBytesAre) {
  TreeTally files({.max_bytes = 1000, .max_files = 2});
  files.add_entry();
  files.add_entry();
  EXPECT_EQ(files.over_limit(), std::nullopt);
  files.add_entry();
  EXPECT_EQ(files.over_limit(), "checkpoint has more than 2 files");

  TreeTally bytes({.max_bytes = 1000, .max_files = 2});
  bytes.add_bytes(600);
  EXPECT_EQ(bytes.over_limit(), std::nullopt);
  bytes.add_bytes(401);
  EXPECT_EQ(bytes.over_limit(), "checkpoint is larger than the limit of 1000 bytes");
}

TEST(TreeRules, LeftOutNamesABoundedNumberAndCountsTheRest) {
  LeftOut left_out;
  EXPECT_TRUE(left_out.empty());
  for (std::size_t i = 0; i < LeftOut::kMaxNamedLeftOut + 5; ++i)
    left_out.add("fifo-" + std::to_string(i), "FIFO");
  EXPECT_EQ(left_out.named.size(), LeftOut::kMaxNamedLeftOut);
  EXPECT_EQ(left_out.unnamed, 5u);
  EXPECT_EQ(left_out.named.front(), (LeftOutEntry{.path = "fifo-0", .rule = "FIFO"}));
}

TEST(TreeRules, LeftOutPathsArePrintable) {
  LeftOut left_out;
  left_out.add("out/bad\xff.txt", "name is not UTF-8");
  EXPECT_EQ(left_out.named.at(0).path, "out/bad\\xff.txt");
}

}  // namespace
}  // namespace inflight::checkpoint
