#include "inflight/core/process_tree.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

namespace inflight {
namespace {

std::vector<pid_t> sorted(std::vector<pid_t> pids) {
  std::sort(pids.begin(), pids.end());
  return pids;
}

TEST(PpidFromStat, ReadsTheFieldAfterTheLastParenthesis) {
  EXPECT_EQ(ppid_from_stat("4242 (sleep) S 17 4242 4242 0 -1"), 17);
  // A command name may hold spaces and parentheses of its own.
  EXPECT_EQ(ppid_from_stat("99 (a) b) (c) R 123 99 99 0"), 123);
  EXPECT_EQ(ppid_from_stat("1 (init) S 0 1 1"), 0);
}

TEST(PpidFromStat, RefusesTextThatIsNoStatLine) {
  EXPECT_EQ(ppid_from_stat(""), std::nullopt);
  EXPECT_EQ(ppid_from_stat("12 (x"), std::nullopt);
  EXPECT_EQ(ppid_from_stat("12 (x) S"), std::nullopt);
  EXPECT_EQ(ppid_from_stat("12 (x) S abc"), std::nullopt);
}

// A shim 10 with a leader 11; 12 forked by the leader; 13 re-parented to the
// shim (a double fork); 14 below 13; 20 and 21 belong to someone else.
TEST(DescendantsOf, FindsEveryLevelAndNothingOutside) {
  const ProcessLink links[] = {{14, 13}, {11, 10}, {12, 11}, {13, 10}, {20, 1}, {21, 20}, {10, 5}};
  EXPECT_EQ(sorted(descendants_of(10, links)), (std::vector<pid_t>{11, 12, 13, 14}));
  EXPECT_EQ(sorted(descendants_of(13, links)), (std::vector<pid_t>{14}));
  EXPECT_TRUE(descendants_of(14, links).empty());
}

TEST(DescendantsOf, ACycleInAStaleReadEnds) {
  // Pids reused while /proc was read may make a cycle, through the root or below it.
  const ProcessLink through_root[] = {{11, 10}, {10, 11}};
  EXPECT_EQ(descendants_of(10, through_root), (std::vector<pid_t>{11}));
  const ProcessLink below[] = {{11, 10}, {12, 11}, {11, 12}};
  EXPECT_EQ(sorted(descendants_of(10, below)), (std::vector<pid_t>{11, 12}));
}

TEST(ReadProcessLinks, HoldsThisProcessUnderItsParent) {
  const auto links = read_process_links();
  const auto self = std::find_if(links.begin(), links.end(),
                                 [](const ProcessLink& l) { return l.pid == ::getpid(); });
  ASSERT_NE(self, links.end());
  EXPECT_EQ(self->ppid, ::getppid());
}

}  // namespace
}  // namespace inflight
