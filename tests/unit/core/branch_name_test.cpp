// The names of layout 2's refs, and the bucket of a run id: a format on the
// server, so the values themselves are held here, not only their shape.
#include "inflight/core/branch_name.hpp"

#include <gtest/gtest.h>

#include <map>

namespace inflight::checkpoint {
namespace {

TEST(BranchName, LayoutTwosRefsAreListedWithTheBranchesOrNotAtAll) {
  // The index refs come with every listing of refs/heads/inflight; the archive
  // never does, and no result ref or branch can be taken for it.
  EXPECT_TRUE(kRunsRef.starts_with(kInflightPrefix));
  EXPECT_TRUE(kRunsLogRef.starts_with(kInflightPrefix));
  EXPECT_FALSE(kArchiveRef.starts_with(kInflightPrefix));
  EXPECT_FALSE(parse_result_ref(kArchiveRef).has_value());
  EXPECT_FALSE(parse_branch_ref(kRunsRef).has_value());
  EXPECT_FALSE(parse_lease_ref(kRunsLogRef).has_value());
}

TEST(BranchName, ARunsBucketIsFixedAndSpreadsIds) {
  // Fixed values: a change here moves entries away from where readers look.
  EXPECT_EQ(runs_bucket("r-1"), "3b");
  EXPECT_EQ(runs_bucket("r-20261129T120000Z-0a1b2c"), "e6");
  std::map<std::string, int> counts;
  for (int i = 0; i < 25600; ++i) {
    const auto bucket = runs_bucket("r-" + std::to_string(i));
    ASSERT_EQ(bucket.size(), 2u);
    ASSERT_EQ(bucket.find_first_not_of("0123456789abcdef"), std::string::npos) << bucket;
    ++counts[bucket];
  }
  EXPECT_EQ(counts.size(), 256u);
  for (const auto& [bucket, n] : counts) EXPECT_LT(n, 150) << bucket;  // 100 on average
}

}  // namespace
}  // namespace inflight::checkpoint
