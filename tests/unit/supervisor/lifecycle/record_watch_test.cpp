// RecordWatch (docs/checkpoints.md "Leases and clocks"): a record is over
// only once seen unchanged for its whole term by this pod's steady clock;
// its timestamps never count.
#include "inflight/supervisor/lifecycle/record_watch.hpp"

#include <gtest/gtest.h>

namespace inflight {
namespace {

using std::chrono::seconds;

checkpoint::WatchedRecord lease(const std::string& oid, std::int64_t written) {
  return {.ref = "refs/heads/inflight-lease/pod-b",
          .oid = oid,
          .term = 30,
          .written = written,
          .pod = "pod-b"};
}

TEST(RecordWatch, ARecordIsOverOnlyOnceSeenUnchangedForItsTerm) {
  RecordWatch watch(seconds(10));
  const auto t0 = SteadyClock::now();
  // Written "ten minutes ago" by the writer's clock: no matter.
  watch.saw({lease("a", 0)}, t0);
  EXPECT_TRUE(watch.expired(t0 + seconds(29)).empty());
  EXPECT_EQ(watch.next_expiry(t0 + seconds(20)), seconds(10));
  watch.saw({lease("a", 0)}, t0 + seconds(20));  // unchanged: still since t0
  EXPECT_EQ(watch.expired(t0 + seconds(30)).at("refs/heads/inflight-lease/pod-b"), "a");
}

TEST(RecordWatch, ARecordThatChangedIsAliveAgain) {
  RecordWatch watch(seconds(10));
  const auto t0 = SteadyClock::now();
  watch.saw({lease("a", 0)}, t0);
  watch.saw({lease("b", 0)}, t0 + seconds(25));  // renewed
  EXPECT_TRUE(watch.expired(t0 + seconds(40)).empty());
  EXPECT_EQ(watch.expired(t0 + seconds(55)).at("refs/heads/inflight-lease/pod-b"), "b");
}

TEST(RecordWatch, ARecordNoLongerSeenIsForgotten) {
  RecordWatch watch(seconds(10));
  const auto t0 = SteadyClock::now();
  watch.saw({lease("a", 0)}, t0);
  watch.saw({}, t0 + seconds(5));
  EXPECT_TRUE(watch.expired(t0 + seconds(60)).empty());
  EXPECT_EQ(watch.next_expiry(t0), std::nullopt);
}

}  // namespace
}  // namespace inflight
