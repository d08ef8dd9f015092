// ShutdownPlan against the in-memory store (docs/serve.md "Shutdown"): a signal SIGTERMs every
// child, the flush window's end (or a second signal) SIGKILLs what is left, every interrupted run
// is pushed with reason `shutdown`, and the exit code says whether everything landed. The lease
// rides the last push only when every earlier one landed.
#include "inflight/supervisor/lifecycle/shutdown_plan.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <optional>
#include <set>

#include "supervisor/supervisor_fixture.hpp"

namespace inflight {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const OrderedJson kSleeper = {{"child", "sleeper"}};
const OrderedJson kStubborn = {{"child", "stubborn"}};

class ShutdownPlanTest : public SupervisorFixture {
 protected:
  ShutdownPlan& make_plan(Duration grace_period, Duration flush_window) {
    plan = std::make_unique<ShutdownPlan>(io, supervisor(), &lease, grace_period, flush_window,
                                          [this](int code) { exit_code = code; });
    return *plan;
  }
  bool wait_for_exit() {
    return wait_for([this] { return exit_code.has_value(); });
  }
  std::set<std::string> shutdown_saves() const {
    const auto ids = store.saved_runs(checkpoint::CheckpointReason::shutdown);
    return {ids.begin(), ids.end()};
  }
  // One running run and one queued behind it.
  std::pair<inflight::Run*, inflight::Run*> running_and_queued() {
    auto limits = settings();
    limits.max_concurrent = 1;
    make_supervisor(limits).finish_restore();
    inflight::Run& running = submit(kSleeper);
    inflight::Run& queued = submit(kSleeper);
    return {&running, &queued};
  }

  PodLease lease{io, store, {.period = seconds(3600), .length = seconds(7200)}, seconds(60)};
  std::unique_ptr<ShutdownPlan> plan;
  std::optional<int> exit_code;
};

TEST_F(ShutdownPlanTest, ASignalTermsEveryChildAndPushesEachRunWithTheLease) {
  ready_supervisor();
  inflight::Run& a = submit(kSleeper);
  inflight::Run& b = submit(kSleeper);
  ASSERT_TRUE(wait_for([&] { return started(a) && started(b); }));

  make_plan(seconds(60), seconds(30)).on_signal(SIGTERM);
  EXPECT_EQ(a.status(), RunStatus::stopping);
  EXPECT_EQ(b.status(), RunStatus::stopping);
  ASSERT_TRUE(wait_for_exit());

  EXPECT_EQ(exit_code, 0);
  for (const inflight::Run* run : {&a, &b}) {
    EXPECT_EQ(run->status(), RunStatus::interrupted);
    EXPECT_EQ(run->params.attempts.back().signal, SIGTERM);
    EXPECT_EQ(run->params.attempts.back().outcome, "interrupted");
  }
  EXPECT_EQ(shutdown_saves(), (std::set<std::string>{a.id, b.id}));
  ASSERT_EQ(store.batches().size(), 1u);  // one push for all, and for the lease
  EXPECT_TRUE(store.batches()[0].release_lease);
  EXPECT_TRUE(store.batches()[0].lease_until.has_value());
  EXPECT_FALSE(store.batches()[0].keep_objects);
  EXPECT_TRUE(plan->lease_released());
}

TEST_F(ShutdownPlanTest, StartedRunsArePushedFirstAndTheLastPushReleasesTheLease) {
  const auto [running, queued] = running_and_queued();
  make_plan(seconds(60), seconds(30)).on_signal(SIGTERM);
  EXPECT_EQ(queued->status(), RunStatus::interrupted);  // never started now
  ASSERT_TRUE(wait_for_exit());

  EXPECT_EQ(exit_code, 0);
  ASSERT_EQ(store.batches().size(), 2u);
  EXPECT_EQ(store.batches()[0].runs.at(0).run_id, running->id);
  EXPECT_FALSE(store.batches()[0].release_lease);
  EXPECT_EQ(store.batches()[1].runs.at(0).run_id, queued->id);
  EXPECT_TRUE(store.batches()[1].release_lease);
  EXPECT_TRUE(plan->lease_released());
}

TEST_F(ShutdownPlanTest, ACheckpointThatFailsExitsOneAndKeepsTheLease) {
  const auto [running, queued] = running_and_queued();
  store.answer_saves_of(running->id, Answer::fail);
  make_plan(seconds(60), seconds(30)).on_signal(SIGTERM);
  ASSERT_TRUE(wait_for_exit());

  EXPECT_EQ(exit_code, 1);
  EXPECT_EQ(shutdown_saves(), (std::set<std::string>{running->id, queued->id}));
  ASSERT_EQ(store.batches().size(), 2u);
  EXPECT_FALSE(store.batches()[1].release_lease);
  EXPECT_FALSE(store.batches()[1].lease_until.has_value());
  EXPECT_FALSE(plan->lease_released());
}

TEST_F(ShutdownPlanTest, ALeaseTheLastPushDidNotReleaseIsNoFailure) {
  submit(kSleeper);  // still restoring: queued, never started
  store.answer_next(Step::lease, Answer::fail);
  make_plan(seconds(60), seconds(30)).on_signal(SIGTERM);
  ASSERT_TRUE(wait_for_exit());

  EXPECT_EQ(exit_code, 0);
  EXPECT_FALSE(plan->lease_released());  // serve gives it up on its own
}

TEST_F(ShutdownPlanTest, ASecondSignalSkipsTheFlushWindow) {
  ready_supervisor();
  inflight::Run& run = submit(kStubborn);
  ASSERT_TRUE(wait_for([&] { return started(run); }));  // its SIGTERM trap is set

  auto& plan = make_plan(seconds(120), seconds(60));
  plan.on_signal(SIGTERM);
  plan.on_signal(SIGTERM);
  ASSERT_TRUE(wait_for_exit());  // long before the flush window ends

  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(run.params.attempts.back().signal, SIGKILL);
  EXPECT_EQ(shutdown_saves(), std::set<std::string>{run.id});
}

TEST_F(ShutdownPlanTest, TheFlushWindowsEndKillsWhatIsLeft) {
  ready_supervisor();
  inflight::Run& run = submit(kStubborn);
  ASSERT_TRUE(wait_for([&] { return started(run); }));

  make_plan(seconds(120), milliseconds(20)).on_signal(SIGTERM);
  ASSERT_TRUE(wait_for_exit());

  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(run.params.attempts.back().signal, SIGKILL);
  EXPECT_EQ(run.status(), RunStatus::interrupted);
}

// The push's connection opens at the signal, and each run goes to it as its
// child exits: the run whose child left at once is there while another still
// flushes, and both ride one push with the lease.
TEST_F(ShutdownPlanTest, EachRunGoesToTheOpenPushAsItsChildExits) {
  ready_supervisor();
  inflight::Run& quick = submit(kSleeper);
  inflight::Run& slow = submit(kStubborn);
  ASSERT_TRUE(wait_for([&] { return started(quick) && started(slow); }));

  auto& plan = make_plan(seconds(120), seconds(60));
  plan.on_signal(SIGTERM);
  EXPECT_EQ(store.streams_opened(), 1);
  ASSERT_TRUE(wait_for([&] { return store.streamed() == std::vector<std::string>{quick.id}; }));
  EXPECT_EQ(slow.status(), RunStatus::stopping);
  EXPECT_TRUE(store.batches().empty());

  plan.on_signal(SIGTERM);  // ends the flush: the stubborn child is killed
  ASSERT_TRUE(wait_for_exit());
  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(store.streamed(), (std::vector<std::string>{quick.id, slow.id}));
  ASSERT_EQ(store.batches().size(), 1u);
  EXPECT_TRUE(store.batches()[0].release_lease);
  EXPECT_FALSE(store.batches()[0].keep_objects);
  EXPECT_TRUE(plan.lease_released());
}

TEST_F(ShutdownPlanTest, TheGracePeriodsEndBeforeAPushLandedExitsOne) {
  submit(kSleeper);
  store.answer(Step::save, Answer::stall);
  make_plan(milliseconds(50), milliseconds(20)).on_signal(SIGTERM);
  ASSERT_TRUE(wait_for_exit());

  EXPECT_EQ(exit_code, 1);
  EXPECT_EQ(store.batches().size(), 1u);
}

TEST_F(ShutdownPlanTest, CheckpointsWaitForARestoreUnderWay) {
  inflight::Run& run = submit(kSleeper);
  auto& plan = make_plan(seconds(60), seconds(30));
  plan.restore_started();
  plan.on_signal(SIGTERM);
  EXPECT_TRUE(store.batches().empty());

  plan.restore_finished();
  ASSERT_TRUE(wait_for_exit());
  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(shutdown_saves(), std::set<std::string>{run.id});
}

TEST_F(ShutdownPlanTest, AFinishedRunsBranchDeletionIsTriedAgainAndAwaited) {
  store.answer_next(Step::release, Answer::fail);
  ready_supervisor();
  inflight::Run& run = submit(OrderedJson::object());
  ASSERT_TRUE(wait_for([&] { return store.releases().size() == 1 && run.store_ops.empty(); }));

  make_plan(seconds(60), seconds(30)).on_signal(SIGTERM);
  ASSERT_TRUE(wait_for_exit());
  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(store.releases().size(), 2u);
  EXPECT_FALSE(run.lifecycle.release_pending());
  EXPECT_FALSE(plan->lease_released());  // not with a deletion under way: serve gives it up
}

TEST_F(ShutdownPlanTest, AFinishedRunsBranchThatSurvivesExitsOne) {
  store.answer(Step::release, Answer::fail);
  ready_supervisor();
  inflight::Run& run = submit(OrderedJson::object());
  ASSERT_TRUE(wait_for([&] { return store.releases().size() == 1 && run.store_ops.empty(); }));

  make_plan(seconds(60), seconds(30)).on_signal(SIGTERM);
  ASSERT_TRUE(wait_for_exit());
  EXPECT_EQ(exit_code, 1);
  EXPECT_TRUE(run.lifecycle.release_pending());
}

// serve: the release steps a finished run has left go at once, every run in
// each push: final states with their results and index entries, then the
// deletions, which take the lease with them.
TEST_F(ShutdownPlanTest, FinishedRunsReleaseInTwoPushesTheLastTakingTheLease) {
  serve_supervisor(true);
  inflight::Run& first = submit(OrderedJson::object());
  inflight::Run& second = submit(OrderedJson::object());
  ASSERT_TRUE(wait_for([&] { return is_final(first.status()) && is_final(second.status()); }));

  make_plan(seconds(60), seconds(30)).on_signal(SIGTERM);
  ASSERT_TRUE(wait_for_exit());
  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(store.release_steps(),
            (std::vector<std::string>{"final " + first.id, "final " + second.id,
                                      "delete " + first.id, "delete " + second.id}));
  ASSERT_EQ(store.batches().size(), 2u);
  EXPECT_FALSE(store.batches()[0].release_lease);
  EXPECT_TRUE(store.batches()[0].keep_objects);  // the next round builds on them
  EXPECT_TRUE(store.batches()[1].release_lease);
  EXPECT_TRUE(plan->lease_released());
  EXPECT_TRUE(store.releases().empty());  // no release of its own
}

// A run cancelled while the others flush finishes during the shutdown: the
// release rounds take it too, and the shutdown waits for it.
TEST_F(ShutdownPlanTest, ARunCancelledDuringTheFlushIsReleasedBeforeTheExit) {
  serve_supervisor(true);
  inflight::Run& done = submit(OrderedJson::object());
  ASSERT_TRUE(wait_for([&] { return is_final(done.status()); }));
  inflight::Run& cancelled = submit(kStubborn);
  inflight::Run& flushing = submit(kSleeper);
  ASSERT_TRUE(wait_for([&] { return started(cancelled) && started(flushing); }));
  supervisor().stop(cancelled);  // it ignores SIGTERM: killed at the flush window's end

  make_plan(seconds(60), milliseconds(300)).on_signal(SIGTERM);
  ASSERT_TRUE(wait_for_exit());
  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(cancelled.status(), RunStatus::cancelled);
  EXPECT_FALSE(cancelled.lifecycle.release_pending());
  EXPECT_FALSE(done.lifecycle.release_pending());
  const auto& steps = store.release_steps();
  EXPECT_NE(std::find(steps.begin(), steps.end(), "delete " + cancelled.id), steps.end());
  EXPECT_TRUE(store.releases().empty());
  // The lease goes with the last push only, after the interrupted run's.
  const auto& batches = store.batches();
  for (std::size_t i = 0; i + 1 < batches.size(); ++i) EXPECT_FALSE(batches[i].release_lease) << i;
}

// A run whose release step the server's rules refused goes in a push of its
// own in each round: a hook declining its result declines nothing else.
TEST_F(ShutdownPlanTest, ARefusedReleaseGoesInPushesOfItsOwnAtShutdown) {
  serve_supervisor(true);
  inflight::Run& refused = submit(OrderedJson::object());
  ASSERT_TRUE(wait_for([&] { return is_final(refused.status()); }));
  refused.checkpoint.refusals = 1;  // a periodic push saw its result refused
  inflight::Run& also_refused = submit(OrderedJson::object());
  inflight::Run& other = submit(OrderedJson::object());
  ASSERT_TRUE(
      wait_for([&] { return is_final(also_refused.status()) && is_final(other.status()); }));
  also_refused.checkpoint.refusals = 1;

  make_plan(seconds(60), seconds(30)).on_signal(SIGTERM);
  ASSERT_TRUE(wait_for_exit());
  EXPECT_EQ(exit_code, 0);
  for (const auto& batch : store.batches()) {
    const bool has_refused =
        std::any_of(batch.runs.begin(), batch.runs.end(),
                    [&](const auto& run) { return run.run_id == refused.id; }) ||
        std::any_of(batch.finals.begin(), batch.finals.end(),
                    [&](const auto& run) { return run.run_id == refused.id; });
    const bool has_other = std::any_of(batch.finals.begin(), batch.finals.end(),
                                       [&](const auto& run) { return run.run_id == other.id; });
    const bool has_also_refused =
        std::any_of(batch.runs.begin(), batch.runs.end(),
                    [&](const auto& run) { return run.run_id == also_refused.id; });
    EXPECT_FALSE(has_refused && has_other);
    EXPECT_FALSE(has_refused && has_also_refused);  // each refused run alone
    EXPECT_FALSE(has_refused && batch.lease_until.has_value());
  }
  auto saved_alone = store.saved_runs(checkpoint::CheckpointReason::final);
  std::sort(saved_alone.begin(), saved_alone.end());
  auto expected = std::vector<std::string>{refused.id, also_refused.id};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(saved_alone, expected);  // their final states alone first
  EXPECT_FALSE(refused.lifecycle.release_pending());
  EXPECT_FALSE(other.lifecycle.release_pending());
}

// A restore under way at the signal holds the rounds back too; they go
// once it is over, and the exit waits for them.
TEST_F(ShutdownPlanTest, FinishedRunsAreReleasedAfterARestoreUnderWay) {
  serve_supervisor(true);
  inflight::Run& run = submit(OrderedJson::object());
  ASSERT_TRUE(wait_for([&] { return is_final(run.status()); }));
  auto& plan = make_plan(seconds(60), seconds(30));
  plan.restore_started();
  plan.on_signal(SIGTERM);
  EXPECT_TRUE(store.batches().empty());

  plan.restore_finished();
  ASSERT_TRUE(wait_for_exit());
  EXPECT_EQ(exit_code, 0);
  EXPECT_FALSE(run.lifecycle.release_pending());
  EXPECT_EQ(store.release_steps(),
            (std::vector<std::string>{"final " + run.id, "delete " + run.id}));
}

// A deletion that never lands exits 1, but the final state is in the
// results repo: nothing is on this disk alone, so the lease goes.
TEST_F(ShutdownPlanTest, ABranchWhoseDeletionFailedExitsOneAndGivesTheLeaseUp) {
  serve_supervisor(false);
  inflight::Run& run = submit(OrderedJson::object());
  ASSERT_TRUE(wait_for([&] { return is_final(run.status()); }));
  store.answer_next(Step::release, Answer::land);  // the final state
  store.answer(Step::release, Answer::fail);       // every deletion

  make_plan(seconds(60), seconds(30)).on_signal(SIGTERM);
  ASSERT_TRUE(wait_for_exit());
  EXPECT_EQ(exit_code, 1);
  EXPECT_TRUE(run.lifecycle.release_pending());
  EXPECT_FALSE(plan->keeps_lease());
}

// A final state that never lands lives on this disk alone: the lease stays.
TEST_F(ShutdownPlanTest, AFinalStateThatDidNotLandKeepsTheLease) {
  serve_supervisor(false);
  inflight::Run& run = submit(OrderedJson::object());
  ASSERT_TRUE(wait_for([&] { return is_final(run.status()); }));
  store.answer(Step::release, Answer::fail);

  make_plan(seconds(60), seconds(30)).on_signal(SIGTERM);
  ASSERT_TRUE(wait_for_exit());
  EXPECT_EQ(exit_code, 1);
  EXPECT_EQ(run.lifecycle.release_step(), ReleaseStep::final_state);
  EXPECT_TRUE(plan->keeps_lease());
  EXPECT_FALSE(plan->lease_released());
}

}  // namespace
}  // namespace inflight
