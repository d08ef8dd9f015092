// The lease's message read back as a restore reads it: a lease that keeps
// another pod's runs must be one that pod could have written.
#include "inflight/checkpoint/lease_record.hpp"

#include <gtest/gtest.h>

#include <string>

namespace inflight::checkpoint {
namespace {

constexpr std::int64_t kNow = 1'800'000'000;

std::optional<Lease> parse(const std::string& trailers) {
  return parse_lease_message("inflight lease p\n\n" + trailers, kNow);
}

TEST(LeaseRecord, ReadsWhatItWrites) {
  const auto text = write_lease_message({.pod = "pod-a", .until = kNow + 90});
  EXPECT_EQ(text, "inflight lease pod-a\n\nInflight-Pod: pod-a\nInflight-Lease-Until: " +
                      std::to_string(kNow + 90) + "\n");
  const auto lease = parse_lease_message(text, kNow);
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->pod, "pod-a");
  EXPECT_EQ(lease->until, kNow + 90);
}

TEST(LeaseRecord, AnEndedLeaseIsStillALease) {
  const auto lease = parse("Inflight-Pod: p\nInflight-Lease-Until: 5\n");
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->until, 5);
}

TEST(LeaseRecord, AnEndMoreThanADayAheadIsRefused) {
  EXPECT_TRUE(parse("Inflight-Pod: p\nInflight-Lease-Until: " + std::to_string(kNow + 86400)));
  EXPECT_FALSE(parse("Inflight-Pod: p\nInflight-Lease-Until: " + std::to_string(kNow + 86401)));
  EXPECT_FALSE(parse("Inflight-Pod: p\nInflight-Lease-Until: 99999999999999999999999"));
}

TEST(LeaseRecord, MissingOrSpoiltTrailersAreNoLease) {
  EXPECT_FALSE(parse("Inflight-Pod: p\n"));
  EXPECT_FALSE(parse("Inflight-Lease-Until: 12\n"));
  EXPECT_FALSE(parse("Inflight-Pod: p\nInflight-Lease-Until: 12abc\n"));
  EXPECT_FALSE(parse("Inflight-Pod: p\nInflight-Lease-Until: \n"));
  EXPECT_FALSE(parse("Inflight-Pod: \nInflight-Lease-Until: 12\n"));
  EXPECT_FALSE(parse_lease_message("", kNow));
}

TEST(LeaseRecord, APodThatIsNotANameIsNoLease) {
  EXPECT_FALSE(parse("Inflight-Pod: a b\nInflight-Lease-Until: 12\n"));
  EXPECT_FALSE(parse("Inflight-Pod: p\xff\nInflight-Lease-Until: 12\n"));
}

TEST(LeaseRecord, ADuplicatedTrailerIsReadFromItsLastLine) {
  const auto lease = parse(
      "Inflight-Pod: a\nInflight-Lease-Until: 12\nInflight-Pod: b\nInflight-Lease-Until: 13\n");
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->pod, "b");
  EXPECT_EQ(lease->until, 13);
  EXPECT_FALSE(parse("Inflight-Pod: p\nInflight-Lease-Until: 12\nInflight-Lease-Until: x\n"));
}

TEST(LeaseRecord, TheSubjectIsNeverATrailer) {
  EXPECT_FALSE(parse_lease_message("Inflight-Pod: p\nInflight-Lease-Until: 12\n", kNow));
  EXPECT_FALSE(parse_lease_message("Inflight-Lease-Until: 12\n\nInflight-Pod: p\n", kNow));
}

}  // namespace
}  // namespace inflight::checkpoint
