// The Failure table and Result: every kind reads back as itself, and a
// Result says which of its two it holds.
#include "inflight/core/failure.hpp"

#include <gtest/gtest.h>

#include <string>

namespace inflight {
namespace {

TEST(FailureTest, EveryKindReadsBackAsItself) {
  for (auto kind : {Failure::other, Failure::unreachable, Failure::auth, Failure::rejected,
                    Failure::not_found, Failure::hostile_tree, Failure::cache, Failure::deadline,
                    Failure::ambiguous, Failure::over_limit})
    EXPECT_EQ(parse_failure(to_string(kind)), kind) << to_string(kind);
}

TEST(FailureTest, WordsAreTheProtocolsWords) {
  EXPECT_EQ(to_string(Failure::not_found), "not_found");
  EXPECT_EQ(to_string(Failure::hostile_tree), "hostile_tree");
  EXPECT_EQ(parse_failure("rejected"), Failure::rejected);
}

TEST(FailureTest, UnknownWordIsNoKind) {
  EXPECT_FALSE(parse_failure("Rejected").has_value());
  EXPECT_FALSE(parse_failure("").has_value());
}

TEST(FailureTest, OnlyTheConnectionsFailuresAreNetworkFailures) {
  EXPECT_TRUE(network_failure(Failure::unreachable));
  EXPECT_TRUE(network_failure(Failure::auth));
  EXPECT_FALSE(network_failure(Failure::rejected));
  EXPECT_FALSE(network_failure(Failure::cache));
}

Result<int> half(int n) {
  if (n % 2 != 0) return Error{.kind = Failure::other, .message = "odd", .candidates = {}};
  return n / 2;
}

TEST(ResultTest, HoldsTheValue) {
  const auto r = half(8);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(*r, 4);
  EXPECT_EQ(r.value(), 4);
}

TEST(ResultTest, HoldsTheError) {
  const auto r = half(7);
  ASSERT_FALSE(r.has_value());
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.error().kind, Failure::other);
  EXPECT_EQ(r.error().message, "odd");
}

TEST(ResultTest, FailedWithNamesOnlyItsOwnKind) {
  EXPECT_TRUE(half(7).failed_with(Failure::other));
  EXPECT_FALSE(half(7).failed_with(Failure::rejected));
  EXPECT_FALSE(half(8).failed_with(Failure::other));
  EXPECT_FALSE(Result<void>().failed_with(Failure::other));
}

TEST(ResultTest, ArrowReachesTheValuesMembers) {
  Result<std::string> r = std::string("abc");
  EXPECT_EQ(r->size(), 3u);
  r->push_back('d');
  EXPECT_EQ(*r, "abcd");
}

TEST(ResultTest, AccessingTheWrongSideThrows) {
  const Result<int> failed = Error{.kind = Failure::rejected, .message = "", .candidates = {}};
  EXPECT_THROW((void)failed.value(), std::bad_variant_access);
  const Result<int> held = 1;
  EXPECT_THROW((void)held.error(), std::bad_variant_access);
}

TEST(ResultTest, VoidResultIsSuccessUntilGivenAnError) {
  const Result<void> done;
  EXPECT_TRUE(done.has_value());
  const Result<void> failed = Error{.kind = Failure::ambiguous,
                                    .message = "several",
                                    .candidates = {"inflight/a/r", "inflight/b/r"}};
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().kind, Failure::ambiguous);
  EXPECT_EQ(failed.error().candidates.size(), 2u);
}

}  // namespace
}  // namespace inflight
