// The CheckpointScheduler alone, through the in-memory port: runs made here
// in their states, no supervisor and no process.
#include "inflight/supervisor/runs/checkpoint_scheduler.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "inflight/supervisor/lifecycle/pod_lease.hpp"
#include "supervisor/memory_checkpoints.hpp"
#include "supervisor/run_until.hpp"
#include "temp_dir.hpp"

namespace inflight {
namespace {

using std::chrono::milliseconds;

class CheckpointSchedulerTest : public ::testing::Test {
 protected:
  inflight::Run& add(const std::string& id, RunState state) {
    checkpoint::RunParams params;
    params.run_id = id;
    params.origin_pod = "pod-a";
    const auto dir = runs_dir.path() / id;
    std::filesystem::create_directories(dir);
    runs.push_back(std::make_unique<inflight::Run>(id, dir, std::move(params), io, state));
    return *runs.back();
  }
  CheckpointScheduler& scheduler(bool release_at_ticks = false) {
    if (!scheduler_)
      scheduler_ = std::make_unique<CheckpointScheduler>(
          io, store,
          SchedulerSettings{.network_timeout = std::chrono::seconds(60),
                            .publish = true,
                            .release_at_ticks = release_at_ticks},
          disk_health, runs,
          CheckpointScheduler::Hooks{
              .fenced = [this](inflight::Run& run) { fenced.push_back(run.id); },
              .before_tick = [this] { ++ticks; }});
    return *scheduler_;
  }
  SteadyClock::time_point soon() const { return SteadyClock::now() + std::chrono::seconds(10); }
  bool wait_for(const std::function<bool()>& effect) { return run_until(io, effect); }

  boost::asio::io_context io;
  MemoryCheckpoints store{io};
  DiskHealth disk_health{io, store, milliseconds(10), std::chrono::seconds(60)};
  TempDir runs_dir;
  std::vector<std::unique_ptr<inflight::Run>> runs;
  std::vector<std::string> fenced;
  int ticks = 0;

 private:
  std::unique_ptr<CheckpointScheduler> scheduler_;
};

TEST_F(CheckpointSchedulerTest, ARunsStoreOperationsRunOneAtATimeInOrder) {
  inflight::Run& run = add("r-1", RunState::running);
  store.answer_next(Step::save, Answer::stall);
  std::vector<int> order;
  scheduler().checkpoint(run, checkpoint::CheckpointReason::manual, soon(),
                         [&](const CheckpointResult&) { order.push_back(1); });
  scheduler().checkpoint(run, checkpoint::CheckpointReason::manual, soon(),
                         [&](const CheckpointResult&) { order.push_back(2); });
  scheduler().when_store_idle(run, [&] { order.push_back(3); });
  ASSERT_TRUE(wait_for([&] { return store.stalled() == 1; }));
  EXPECT_TRUE(order.empty());  // the second waits for the first
  EXPECT_EQ(store.saves().size(), 1u);
  store.finish_stalled(Answer::land);
  ASSERT_TRUE(wait_for([&] { return order.size() == 3; }));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(scheduler().pushes().landed, 2u);
  EXPECT_TRUE(run.checkpoint.last_commit.has_value());
}

TEST_F(CheckpointSchedulerTest, ARejectedPushFencesARunningRunThroughItsOwner) {
  inflight::Run& run = add("r-1", RunState::running);
  store.answer(Step::save, Answer::fenced);
  bool answered = false;
  scheduler().checkpoint(run, checkpoint::CheckpointReason::manual, soon(),
                         [&](const CheckpointResult& result) {
                           answered = true;
                           EXPECT_TRUE(result.failed_with(Failure::rejected));
                         });
  ASSERT_TRUE(wait_for([&] { return answered; }));
  EXPECT_EQ(fenced, (std::vector<std::string>{"r-1"}));
  EXPECT_EQ(scheduler().runs_fenced(), 1u);
  EXPECT_EQ(scheduler().pushes().fenced, 1u);
  EXPECT_TRUE(run.params.handed_over.has_value());
}

TEST_F(CheckpointSchedulerTest, AReleaseLostToAnotherInstanceKeepsTheRunsEnd) {
  inflight::Run& run = add("r-1", RunState::succeeded);
  store.answer(Step::release, Answer::fenced);
  scheduler().release_checkpoint(run);
  ASSERT_TRUE(wait_for([&] { return run.lifecycle.release_step() == ReleaseStep::lost; }));
  EXPECT_EQ(run.lifecycle.state(), RunState::succeeded);
  EXPECT_TRUE(run.lifecycle.fenced());
  EXPECT_TRUE(fenced.empty());  // nothing to stop: the owner is not asked
  EXPECT_EQ(scheduler().results_published(), 0u);
}

TEST_F(CheckpointSchedulerTest, ReleasesSentAtOnceShareABatchWhileOneIsOnItsWay) {
  inflight::Run& first = add("r-1", RunState::succeeded);
  inflight::Run& second = add("r-2", RunState::failed);
  inflight::Run& third = add("r-3", RunState::cancelled);
  store.answer_next(Step::release, Answer::stall);
  scheduler().release_checkpoint(first);
  ASSERT_TRUE(wait_for([&] { return store.stalled() == 1; }));
  scheduler().release_checkpoint(second);
  scheduler().release_checkpoint(third);
  store.finish_stalled(Answer::land);
  ASSERT_TRUE(wait_for([&] { return third.lifecycle.release_step() == ReleaseStep::done; }));
  EXPECT_EQ(store.release_batches(), (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(scheduler().results_published(), 3u);
}

TEST_F(CheckpointSchedulerTest, AtTicksAReleaseTakesOneStepAPushAndTheTickCallsItsHookFirst) {
  inflight::Run& run = add("r-1", RunState::succeeded);
  scheduler(/*release_at_ticks=*/true).release_checkpoint(run);
  EXPECT_TRUE(store.release_steps().empty());  // nothing until a tick
  scheduler().start_periodic_checkpoints(milliseconds(10));
  ASSERT_TRUE(wait_for([&] { return run.lifecycle.release_step() == ReleaseStep::done; }));
  EXPECT_GE(ticks, 2);
  ASSERT_EQ(store.release_steps().size(), 2u);
  EXPECT_EQ(store.release_steps()[0], "final r-1");
  EXPECT_EQ(store.release_steps()[1], "delete r-1");
}

// docs/checkpoints.md "Leases and clocks": an idle pod's ticks push
// nothing, not even its lease; the first push of a run it takes carries the
// lease again, and once the run is released the lease is let go again.
TEST_F(CheckpointSchedulerTest, TicksRenewTheLeaseOnlyWhileARunIsHeld) {
  PodLease lease{io,
                 store,
                 {.period = milliseconds(10), .length = std::chrono::seconds(90)},
                 std::chrono::seconds(60)};
  lease.take();
  lease.taken(true);  // by the first restore
  scheduler().start_periodic_checkpoints(milliseconds(10), &lease);
  ASSERT_TRUE(wait_for([&] { return ticks >= 3; }));
  EXPECT_TRUE(store.batches().empty());
  EXPECT_FALSE(lease.held());
  EXPECT_FALSE(lease.expiry().has_value());

  inflight::Run& run = add("r-1", RunState::queued);  // accepted, never saved
  ASSERT_TRUE(wait_for([&] { return run.checkpoint.last_commit.has_value(); }));
  ASSERT_FALSE(store.batches().empty());
  EXPECT_EQ(store.batches()[0].runs.at(0).run_id, "r-1");
  EXPECT_TRUE(store.batches()[0].lease_until.has_value());  // in the same push
  ASSERT_TRUE(wait_for([&] { return lease.expiry().has_value(); }));

  ASSERT_TRUE(run.lifecycle.apply(RunEvent::start));
  ASSERT_TRUE(run.lifecycle.apply(RunEvent::fail));
  scheduler().release_checkpoint(run);
  ASSERT_TRUE(wait_for([&] { return run.lifecycle.release_step() == ReleaseStep::done; }));
  const auto pushed = store.batches().size();
  const int ticked = ticks;
  ASSERT_TRUE(wait_for([&] { return ticks >= ticked + 3; }));
  EXPECT_EQ(store.batches().size(), pushed);
  EXPECT_FALSE(lease.expiry().has_value());
}

}  // namespace
}  // namespace inflight
