// Wall-clock text as run-params.json and the index write it, read back.
#include "inflight/core/clock.hpp"

#include <gtest/gtest.h>

namespace inflight {
namespace {

TEST(Clock, AnIso8601TimeReadsBackAsWritten) {
  const auto t = SystemClock::from_time_t(1795659544);
  EXPECT_EQ(parse_iso8601_utc(iso8601_utc(t)), t);
}

TEST(Clock, AnythingElseIsNoTime) {
  for (const char* text : {"", "2026-11-26", "2026-11-26T02:54:23", "2026-11-26T02:54:23Z ",
                           "2026-11-26 02:54:23Z", "yesterday", "2026-11-26T02:54:23+01:00"})
    EXPECT_FALSE(parse_iso8601_utc(text)) << text;
}

}  // namespace
}  // namespace inflight
