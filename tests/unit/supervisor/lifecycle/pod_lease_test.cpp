// PodLease against the in-memory store (docs/checkpoints.md "Leases and clocks"): renewed
// every period, a failed renewal tried again at the next, no renewal once
// stopped, and given up only after a renewal under way is over.
#include "inflight/supervisor/lifecycle/pod_lease.hpp"

#include <gtest/gtest.h>

#include "supervisor/memory_checkpoints.hpp"
#include "supervisor/run_until.hpp"

namespace inflight {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

CheckpointResult landed() {
  return Landed{.commit = std::nullopt, .left_out = {}};
}

class PodLeaseTest : public ::testing::Test {
 protected:
  boost::asio::io_context io;
  MemoryCheckpoints store{io};
  LeaseTerms terms{.period = milliseconds(10), .length = seconds(90)};
  PodLease lease{io, store, terms, seconds(60)};
};

TEST(LeaseTerms, OutlastThreeMissedRenewalsAndAWholeShutdown) {
  const auto with_checkpoints = lease_terms(seconds(10), seconds(30));
  EXPECT_EQ(with_checkpoints.period, seconds(10));
  EXPECT_EQ(with_checkpoints.length, seconds(60));
  const auto without = lease_terms(Duration::zero(), seconds(30));
  EXPECT_EQ(without.period, seconds(30));
  EXPECT_EQ(without.length, seconds(120));
  // A period under a second counts as one: clocks of two pods differ a little.
  EXPECT_EQ(lease_terms(milliseconds(200), Duration::zero()).length, seconds(3));
}

TEST_F(PodLeaseTest, KeepRenewsEveryPeriodUntilALengthFromNow) {
  const auto before = SystemClock::now();
  lease.keep();
  EXPECT_TRUE(store.lease_holds().empty());  // the first renewal is a period away
  ASSERT_TRUE(run_until(io, [&] { return store.lease_holds().size() >= 3; }));
  const auto after = SystemClock::now();
  for (const auto until : store.lease_holds()) {
    EXPECT_GE(until, before + terms.length);
    EXPECT_LE(until, after + terms.length);
  }
}

TEST_F(PodLeaseTest, AFailedRenewalIsTriedAgainAtTheNextPeriod) {
  store.answer_next(Step::lease, Answer::fail);
  lease.keep();
  ASSERT_TRUE(run_until(io, [&] { return store.lease_holds().size() >= 2; }));
}

TEST_F(PodLeaseTest, StopEndsTheRenewals) {
  lease.keep();
  ASSERT_TRUE(run_until(io, [&] { return store.lease_holds().size() == 1; }));
  lease.stop();
  const auto renewals = store.lease_holds().size();
  io.restart();
  io.run_for(seconds(10));
  EXPECT_TRUE(io.stopped());  // out of work: no renewal will ever come
  EXPECT_EQ(store.lease_holds().size(), renewals);
  EXPECT_FALSE(lease.renewal().has_value());
}

TEST_F(PodLeaseTest, APushRenewsItOneAtATime) {
  const auto until = lease.renewal();
  ASSERT_TRUE(until.has_value());
  EXPECT_FALSE(lease.renewal().has_value());  // under way
  EXPECT_FALSE(lease.release().has_value());  // a release must not race the renewal
  lease.renewed(landed());
  EXPECT_TRUE(lease.renewal().has_value());
}

TEST_F(PodLeaseTest, GiveUpDropsTheLeaseAndStopsRenewing) {
  lease.keep();
  bool done = false;
  lease.give_up(SteadyClock::now() + seconds(60), [&] { done = true; });
  ASSERT_TRUE(run_until(io, [&] { return done; }));
  EXPECT_EQ(store.lease_drops(), 1);
  EXPECT_TRUE(store.lease_holds().empty());
  EXPECT_FALSE(lease.renewal().has_value());
}

TEST_F(PodLeaseTest, GiveUpWaitsForARenewalUnderWay) {
  store.answer_next(Step::lease, Answer::stall);
  lease.keep();
  ASSERT_TRUE(run_until(io, [&] { return store.stalled() == 1; }));
  bool done = false;
  lease.give_up(SteadyClock::now() + seconds(60), [&] { done = true; });
  EXPECT_EQ(store.lease_drops(), 0);  // the renewal must not land after the deletion
  store.finish_stalled(Answer::land);
  ASSERT_TRUE(run_until(io, [&] { return done; }));
  EXPECT_EQ(store.lease_drops(), 1);
  EXPECT_EQ(store.lease_holds().size(), 1u);  // and no renewal after it
}

TEST_F(PodLeaseTest, GiveUpEndsAtTheDeadlineWhenTheRenewalNeverDoes) {
  store.answer_next(Step::lease, Answer::stall);
  lease.keep();
  ASSERT_TRUE(run_until(io, [&] { return store.stalled() == 1; }));
  bool done = false;
  lease.give_up(SteadyClock::now() + milliseconds(20), [&] { done = true; });
  ASSERT_TRUE(run_until(io, [&] { return done; }));
  EXPECT_EQ(store.lease_drops(), 0);
}

// A renewal of its own (a later look's claims) under way when the period's
// renewal comes: the period's waits for the next period, it is not dropped.
TEST_F(PodLeaseTest, ARenewalAtOnceDoesNotStopThePeriodsRenewals) {
  store.answer_next(Step::lease, Answer::stall);
  lease.keep();
  lease.claimed();
  ASSERT_TRUE(run_until(io, [&] { return store.stalled() == 1; }));
  io.restart();
  io.run_for(milliseconds(50));  // five periods, each finding the renewal under way
  store.finish_stalled(Answer::land);
  ASSERT_TRUE(run_until(io, [&] { return store.lease_holds().size() >= 3; }));
}

// A pod that let its lease go shows none; held again, it shows the end the
// record still says until a renewal lands, so that one that fails raises the
// alert on a lease about to lapse.
TEST_F(PodLeaseTest, LetGoShowsNoneAndAFailedRenewalAfterItShowsTheOldEnd) {
  lease.take();
  lease.taken(true);
  const auto end = lease.expiry();
  ASSERT_TRUE(end.has_value());
  lease.let_go();
  EXPECT_FALSE(lease.held());
  EXPECT_FALSE(lease.expiry().has_value());
  ASSERT_TRUE(lease.renewal().has_value());
  EXPECT_EQ(lease.expiry(), end);
  lease.renewed(
      CheckpointResult(Error{.kind = Failure::other, .message = "down", .candidates = {}}));
  EXPECT_EQ(lease.expiry(), end);
  ASSERT_TRUE(lease.renewal().has_value());
  lease.renewed(landed());
  EXPECT_GT(lease.expiry(), end);
}

// Claims renew a lease that was let go, and only that one.
TEST_F(PodLeaseTest, ClaimsRenewALeaseLetGoAtOnce) {
  lease.take();
  lease.taken(true);
  lease.claimed();
  EXPECT_TRUE(store.lease_holds().empty());  // held: the next push renews it
  lease.let_go();
  lease.claimed();
  ASSERT_TRUE(run_until(io, [&] { return lease.held() && !store.lease_holds().empty(); }));
  EXPECT_EQ(store.lease_holds().size(), 1u);
}

}  // namespace
}  // namespace inflight
