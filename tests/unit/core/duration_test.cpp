#include "inflight/core/duration.hpp"

#include <gtest/gtest.h>

namespace inflight {
namespace {

TEST(ParseDuration, AcceptsEveryUnit) {
  EXPECT_EQ(parse_duration("250ms"), Duration(250));
  EXPECT_EQ(parse_duration("30s"), Duration(30'000));
  EXPECT_EQ(parse_duration("5m"), Duration(300'000));
  EXPECT_EQ(parse_duration("2h"), Duration(7'200'000));
  EXPECT_EQ(parse_duration("7d"), Duration(604'800'000));
  EXPECT_EQ(parse_duration("0"), Duration::zero());
  EXPECT_EQ(parse_duration("0s"), Duration::zero());
}

TEST(ParseDuration, RefusesMalformedText) {
  for (const char* bad :
       {"", "s", "30", "-1s", "1.5s", "30 s", "30sec", "1w", "99999999999999999d", "ms", "1s2"})
    EXPECT_FALSE(parse_duration(bad).has_value()) << bad;
}

TEST(FormatDuration, RoundTrips) {
  EXPECT_EQ(format_duration(Duration(250)), "250ms");
  EXPECT_EQ(format_duration(Duration(30'000)), "30s");
  EXPECT_EQ(parse_duration(format_duration(Duration(1500))), Duration(1500));
}

}  // namespace
}  // namespace inflight
