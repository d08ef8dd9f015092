// RunSupervisor against the in-memory store (docs/serve.md "Runs and attempts", "Checkpoints in
// git"): runs queue beyond max_concurrent, a finished run's branch is released, a fenced run is
// stopped and left alone, a stop cancels, periodic ticks push what changed. The children are real
// processes.
#include "inflight/supervisor/runs/run_supervisor.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <set>

#include "inflight/core/log.hpp"
#include "inflight/core/run_params.hpp"
#include "supervisor/supervisor_fixture.hpp"

namespace inflight {
namespace {

using std::chrono::milliseconds;

const OrderedJson kSleeper = {{"child", "sleeper"}};

class RunSupervisorTest : public SupervisorFixture {
 protected:
  // A member: the periodic tick that renews it may run until TearDown.
  PodLease lease{io,
                 store,
                 {.period = milliseconds(10), .length = std::chrono::seconds(90)},
                 std::chrono::seconds(60)};
  // The result of one manual checkpoint of `run`, once the store answered.
  CheckpointResult checkpoint_now(inflight::Run& run) {
    std::optional<CheckpointResult> answered;
    supervisor().checkpoints().checkpoint(
        run, checkpoint::CheckpointReason::manual, SteadyClock::now() + std::chrono::seconds(60),
        [&](const CheckpointResult& result) { answered = result; });
    EXPECT_TRUE(wait_for([&] { return answered.has_value(); }));
    return answered.value_or(
        Error{.kind = Failure::deadline, .message = "no answer", .candidates = {}});
  }
};

TEST_F(RunSupervisorTest, RunsWaitForRestoreAndQueueBeyondMaxConcurrent) {
  auto limits = settings();
  limits.max_concurrent = 1;
  auto& supervisor = make_supervisor(limits);
  inflight::Run& first = submit(kSleeper);
  EXPECT_EQ(first.status(), RunStatus::queued);  // restore is not over yet
  EXPECT_EQ(supervisor.live_children(), 0);

  supervisor.finish_restore();
  EXPECT_EQ(first.status(), RunStatus::running);
  inflight::Run& second = submit(kSleeper);
  EXPECT_EQ(second.status(), RunStatus::queued);
  EXPECT_EQ(supervisor.live_children(), 1);

  supervisor.stop(first);
  ASSERT_TRUE(wait_for([&] { return second.status() == RunStatus::running; }));
  EXPECT_EQ(first.status(), RunStatus::cancelled);
  EXPECT_EQ(supervisor.live_children(), 1);
}

TEST_F(RunSupervisorTest, AFinishedAttemptReleasesTheRunAfterWritingItsFinalState) {
  ready_supervisor();
  inflight::Run& ok = submit(OrderedJson::object());
  inflight::Run& bad = submit({{"code", 3}});
  ASSERT_TRUE(wait_for([&] {
    return store.releases().size() == 2 && !ok.lifecycle.release_pending() &&
           !bad.lifecycle.release_pending();
  }));

  EXPECT_EQ(ok.status(), RunStatus::succeeded);
  EXPECT_EQ(bad.status(), RunStatus::failed);
  EXPECT_EQ(bad.params.attempts.back().exit_code, 3);
  std::set<std::string> released;
  for (const auto& release : store.releases()) {
    released.insert(release.run_id);
    EXPECT_EQ(release.reason, checkpoint::CheckpointReason::final);
    EXPECT_EQ(release.attempt, 1);
    EXPECT_EQ(release.origin_pod, "pod-a");
  }
  EXPECT_EQ(released, (std::set<std::string>{ok.id, bad.id}));
  // What the release pushes says the run is over: no restore runs it again.
  EXPECT_EQ(checkpoint::read_run_params(ok.dir)->final_status, "succeeded");
  EXPECT_EQ(checkpoint::read_run_params(bad.dir)->final_status, "failed");
}

// A group commit: runs that finish while a release is on its way go
// together in the next one (one result push, one index commit).
TEST_F(RunSupervisorTest, RunsThatFinishDuringAReleaseShareTheNextOne) {
  store.answer_next(Step::release, Answer::stall);
  ready_supervisor();
  inflight::Run& first = submit(OrderedJson::object());
  ASSERT_TRUE(wait_for([&] { return store.stalled() == 1; }));
  inflight::Run& second = submit(OrderedJson::object());
  inflight::Run& third = submit({{"code", 3}});
  ASSERT_TRUE(wait_for([&] { return is_final(second.status()) && is_final(third.status()); }));
  EXPECT_EQ(store.release_batches(), std::vector<std::size_t>{1});

  store.finish_stalled(Answer::land);
  ASSERT_TRUE(wait_for([&] {
    return !first.lifecycle.release_pending() && !second.lifecycle.release_pending() &&
           !third.lifecycle.release_pending();
  }));
  EXPECT_EQ(store.release_batches(), (std::vector<std::size_t>{1, 2}));
}

TEST_F(RunSupervisorTest, AReleaseThatFailedIsTriedAgainByThePeriodicTick) {
  store.answer_next(Step::release, Answer::fail);
  ready_supervisor();
  inflight::Run& run = submit(OrderedJson::object());
  ASSERT_TRUE(wait_for([&] { return store.releases().size() == 1 && run.store_ops.empty(); }));
  EXPECT_TRUE(run.lifecycle.release_pending());

  supervisor().checkpoints().start_periodic_checkpoints(milliseconds(10));
  ASSERT_TRUE(
      wait_for([&] { return store.releases().size() == 2 && !run.lifecycle.release_pending(); }));
  EXPECT_EQ(store.releases()[1].reason, checkpoint::CheckpointReason::final);
  EXPECT_TRUE(store.saved_runs(checkpoint::CheckpointReason::periodic)
                  .empty());  // a finished run is not checkpointed
}

// serve (release_at_ticks): a finished run makes no push of its own. Its
// final state, result and index entry ride one periodic push, its branch
// deletion the next; runs finishing together share each.
TEST_F(RunSupervisorTest, ReleaseStepsRideThePeriodicPushesOneStepEach) {
  serve_supervisor(true);
  inflight::Run& first = submit(OrderedJson::object());
  inflight::Run& second = submit(OrderedJson::object());
  ASSERT_TRUE(wait_for([&] { return is_final(first.status()) && is_final(second.status()); }));
  EXPECT_TRUE(first.lifecycle.release_pending());
  EXPECT_TRUE(store.releases().empty());

  supervisor().checkpoints().start_periodic_checkpoints(milliseconds(10));
  ASSERT_TRUE(wait_for(
      [&] { return !first.lifecycle.release_pending() && !second.lifecycle.release_pending(); }));
  EXPECT_EQ(store.release_steps(),
            (std::vector<std::string>{"final " + first.id, "final " + second.id,
                                      "delete " + first.id, "delete " + second.id}));
  EXPECT_TRUE(store.releases().empty());  // no release of its own
  EXPECT_EQ(store.batches().size(), 2u);
}

// The index entry alone is tried again when only it did not land (another
// pod moved the index); the deletion waits for it.
TEST_F(RunSupervisorTest, AnIndexEntryThatDidNotLandIsTriedAgainBeforeTheDeletion) {
  serve_supervisor(true);
  store.answer_next(Step::release, Answer::land);  // the final state and result
  store.answer_next(Step::release, Answer::fail);  // the index entry
  inflight::Run& run = submit(OrderedJson::object());
  ASSERT_TRUE(wait_for([&] { return is_final(run.status()); }));

  supervisor().checkpoints().start_periodic_checkpoints(milliseconds(10));
  ASSERT_TRUE(wait_for([&] { return !run.lifecycle.release_pending(); }));
  EXPECT_EQ(store.release_steps(),
            (std::vector<std::string>{"final " + run.id, "index 1", "delete " + run.id}));
  ASSERT_EQ(store.batches().size(), 3u);
  EXPECT_EQ(store.batches()[1].indexed, std::vector<std::string>{*run.final_commit});
}

TEST_F(RunSupervisorTest, AReleaseStepThatFailedIsTakenAgainByTheNextPush) {
  serve_supervisor(true);
  store.answer_next(Step::release, Answer::fail);
  inflight::Run& run = submit(OrderedJson::object());
  ASSERT_TRUE(wait_for([&] { return is_final(run.status()); }));

  supervisor().checkpoints().start_periodic_checkpoints(milliseconds(10));
  ASSERT_TRUE(wait_for([&] { return !run.lifecycle.release_pending(); }));
  EXPECT_EQ(store.release_steps(),
            (std::vector<std::string>{"final " + run.id, "final " + run.id, "delete " + run.id}));
  EXPECT_FALSE(run.lifecycle.fenced());
}

// With an interval longer than kReleaseWindow, a run's end brings the next
// push forward, and so does a final state that landed: its release takes
// two pushes within a few seconds, not two intervals.
// A hook that declines results declines the whole push it rides: once a
// release step was refused, the run goes in a push of its own, its final
// state first as a plain checkpoint (without its result), so that the lease
// and the running runs' checkpoints land meanwhile.
TEST_F(RunSupervisorTest, ARunWhoseReleaseStepWasRefusedIsReleasedInPushesOfItsOwn) {
  serve_supervisor(true);
  inflight::Run& run = submit(OrderedJson::object());
  ASSERT_TRUE(wait_for([&] { return is_final(run.status()); }));
  store.answer_next(Step::release, Answer::refused);  // its final state with the result

  supervisor().checkpoints().start_periodic_checkpoints(milliseconds(10), &lease);
  ASSERT_TRUE(wait_for([&] { return !run.lifecycle.release_pending(); }));
  const auto& batches = store.batches();
  EXPECT_EQ(batches[0].finals.size(), 1u);
  const auto alone = std::find_if(batches.begin() + 1, batches.end(),
                                  [](const auto& batch) { return !batch.runs.empty(); });
  ASSERT_NE(alone, batches.end());
  EXPECT_EQ(alone->runs.at(0).run_id, run.id);
  EXPECT_EQ(alone->runs.at(0).reason, checkpoint::CheckpointReason::final);
  EXPECT_FALSE(alone->lease_until.has_value());
  EXPECT_TRUE(std::any_of(batches.begin() + 1, alone, [](const auto& batch) {
    return batch.lease_until.has_value() && batch.finals.empty();
  }));  // the lease went on its own meanwhile
  EXPECT_TRUE(run.final_commit.has_value());
  EXPECT_EQ(store.release_steps(),
            (std::vector<std::string>{"final " + run.id, "final " + run.id, "delete " + run.id}));
  // Its result went alone too, after the final state: the plain save's
  // landing did not end the refusal's backoff.
  const auto result = std::find_if(alone + 1, batches.end(),
                                   [](const auto& batch) { return !batch.finals.empty(); });
  ASSERT_NE(result, batches.end());
  EXPECT_FALSE(result->lease_until.has_value());
}

// A periodic save sent while the run was running and answered after it
// ended holds no final state: the final state still goes alone once its
// release was refused, as a final checkpoint (whose records are counted
// from the finished run, not from the periodic save's earlier count).
TEST_F(RunSupervisorTest, APeriodicSaveAnsweredAfterTheRunEndedIsNotItsFinalState) {
  serve_supervisor(true);
  inflight::Run& run = submit(kSleeper);
  ASSERT_TRUE(wait_for([&] { return std::filesystem::exists(run.dir / "started"); }));
  store.answer_next(Step::save, Answer::stall);
  supervisor().checkpoints().start_periodic_checkpoints(milliseconds(10), &lease);
  ASSERT_TRUE(wait_for([&] { return store.stalled() == 1; }));
  supervisor().stop(run);
  ASSERT_TRUE(wait_for([&] { return is_final(run.status()) && run.lifecycle.release_pending(); }));

  store.answer_next(Step::release, Answer::refused);  // its final state with the result
  store.finish_stalled(Answer::land);
  ASSERT_TRUE(wait_for([&] { return !run.lifecycle.release_pending(); }));
  const auto& batches = store.batches();
  const auto alone = std::find_if(batches.begin() + 1, batches.end(), [&](const auto& batch) {
    return !batch.runs.empty() && batch.runs.at(0).run_id == run.id &&
           batch.runs.at(0).reason == checkpoint::CheckpointReason::final;
  });
  EXPECT_NE(alone, batches.end());
  EXPECT_EQ(store.release_steps(),
            (std::vector<std::string>{"final " + run.id, "final " + run.id, "delete " + run.id}));
}

TEST_F(RunSupervisorTest, AFinishedRunBringsThePeriodicPushForward) {
  serve_supervisor(true);
  supervisor().checkpoints().start_periodic_checkpoints(std::chrono::hours(1));
  inflight::Run& run = submit(OrderedJson::object());

  ASSERT_TRUE(wait_for(
      [&] { return store.release_steps().size() == 2 && !run.lifecycle.release_pending(); },
      std::chrono::seconds(10)));
  EXPECT_EQ(store.release_steps(),
            (std::vector<std::string>{"final " + run.id, "delete " + run.id}));
  EXPECT_EQ(store.batches().size(), 2u);
  EXPECT_TRUE(is_final(run.status()));
}

TEST_F(RunSupervisorTest, WithoutPublishingAFinishedRunsBranchGoesTheNextPush) {
  serve_supervisor(false);
  inflight::Run& run = submit(OrderedJson::object());
  ASSERT_TRUE(wait_for([&] { return is_final(run.status()); }));

  supervisor().checkpoints().start_periodic_checkpoints(milliseconds(10));
  ASSERT_TRUE(wait_for([&] { return !run.lifecycle.release_pending(); }));
  EXPECT_EQ(store.release_steps(),
            (std::vector<std::string>{"final " + run.id, "delete " + run.id}));
}

TEST_F(RunSupervisorTest, AFencedCheckpointStopsTheChildAndLeavesTheRun) {
  ready_supervisor();
  inflight::Run& run = submit(kSleeper);
  store.answer_saves_of(run.id, Answer::fenced);
  std::optional<CheckpointResult> answered;
  supervisor().checkpoints().checkpoint(run, checkpoint::CheckpointReason::manual,
                                        SteadyClock::now() + std::chrono::seconds(60),
                                        [&](const CheckpointResult& result) { answered = result; });
  ASSERT_TRUE(wait_for([&] { return answered && !run.process; }));

  EXPECT_TRUE(answered->failed_with(Failure::rejected));
  EXPECT_TRUE(run.lifecycle.fenced());
  EXPECT_EQ(run.status(), RunStatus::interrupted);
  EXPECT_EQ(run.params.attempts.back().signal, SIGTERM);
  // This disk's copy is stale: marked, so that no later start resumes it.
  EXPECT_TRUE(checkpoint::read_run_params(run.dir)->handed_over.has_value());
  EXPECT_TRUE(store.releases().empty());  // the branch is the other instance's

  // Never touched again: the store is not even asked.
  answered.reset();
  supervisor().checkpoints().checkpoint(run, checkpoint::CheckpointReason::manual,
                                        SteadyClock::now() + std::chrono::seconds(60),
                                        [&](const CheckpointResult& result) { answered = result; });
  ASSERT_TRUE(answered.has_value());
  EXPECT_TRUE(answered->failed_with(Failure::rejected));
  EXPECT_EQ(store.saves().size(), 1u);
}

TEST_F(RunSupervisorTest, ARunOverTheLimitsShowsItsCheckpointErrorWhileOthersGoOn) {
  ready_supervisor();
  inflight::Run& big = submit(kSleeper);
  inflight::Run& other = submit(kSleeper);
  store.answer_saves_of(big.id, Answer::over_limit);

  EXPECT_TRUE(checkpoint_now(big).failed_with(Failure::over_limit));
  EXPECT_TRUE(checkpoint_now(other));
  EXPECT_EQ(big.checkpoint.error, "checkpoint has more than 3 files");
  ASSERT_TRUE(big.checkpoint.failing_since.has_value());
  EXPECT_FALSE(big.lifecycle.fenced());  // its child goes on; only its checkpoint fails
  EXPECT_EQ(big.status(), RunStatus::running);
  EXPECT_FALSE(other.checkpoint.error.has_value());
  EXPECT_TRUE(other.checkpoint.last_commit.has_value());
  EXPECT_EQ(supervisor().checkpoints().failures().at(Failure::over_limit), 1u);

  const auto since = *big.checkpoint.failing_since;
  EXPECT_FALSE(checkpoint_now(big));
  EXPECT_EQ(big.checkpoint.failing_since, since);  // since the first failure
  EXPECT_EQ(supervisor().checkpoints().failures().at(Failure::over_limit), 2u);

  store.answer_saves_of(big.id, Answer::land);
  EXPECT_TRUE(checkpoint_now(big));
  EXPECT_FALSE(big.checkpoint.error.has_value());
  EXPECT_FALSE(big.checkpoint.failing_since.has_value());
}

std::size_t occurrences(const std::string& text, const std::string& part) {
  std::size_t count = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

TEST_F(RunSupervisorTest, EachLeftOutEntryIsLoggedOncePerRun) {
  ready_supervisor();
  inflight::Run& first = submit(kSleeper);
  inflight::Run& second = submit(kSleeper);
  store.answer(Step::save, Answer::land_leaving_out);
  log::set_format(log::Format::json);
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(checkpoint_now(first));
    EXPECT_TRUE(checkpoint_now(second));
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(occurrences(log, "checkpoint entry left out"), 4u) << log;
  for (const auto* run : {&first, &second}) {
    const std::string of_run = "\"run_id\":\"" + run->id + "\"}";
    EXPECT_EQ(occurrences(log, "\"path\":\"out/pipe\",\"rule\":\"FIFO\"," + of_run), 1u) << log;
    EXPECT_EQ(occurrences(log, "\"path\":\"out/link\",\"rule\":\"symbolic link\"," + of_run), 1u)
        << log;
  }
}

TEST_F(RunSupervisorTest, StoppingARunCancelsItAndReleasesIt) {
  auto limits = settings();
  limits.max_concurrent = 1;
  make_supervisor(limits).finish_restore();
  inflight::Run& running = submit(kSleeper);
  inflight::Run& queued = submit(kSleeper);

  supervisor().stop(queued);  // never started: cancelled at once
  EXPECT_EQ(queued.status(), RunStatus::cancelled);
  EXPECT_TRUE(queued.params.attempts.empty());

  supervisor().stop(running);
  EXPECT_EQ(running.status(), RunStatus::stopping);
  ASSERT_TRUE(wait_for([&] { return running.status() == RunStatus::cancelled; }));
  EXPECT_EQ(running.params.attempts.back().outcome, "cancelled");
  EXPECT_EQ(running.params.attempts.back().signal, SIGTERM);
  ASSERT_TRUE(wait_for([&] { return store.releases().size() == 2; }));
  EXPECT_EQ(store.releases()[0].run_id, queued.id);
  EXPECT_EQ(store.releases()[1].run_id, running.id);
  EXPECT_EQ(supervisor().live_children(), 0);  // the queued run did not take the free slot
}

TEST_F(RunSupervisorTest, PeriodicTicksPushChangedRunsWithTheLeaseInOnePush) {
  ready_supervisor();
  inflight::Run& run = submit(kSleeper);
  ASSERT_TRUE(wait_for([&] { return started(run); }));
  supervisor().checkpoints().start_periodic_checkpoints(milliseconds(10), &lease);
  ASSERT_TRUE(wait_for([&] { return store.batches().size() >= 3; }));

  // Saved once: later ticks find its files unchanged and renew the lease alone.
  EXPECT_EQ(store.saved_runs(checkpoint::CheckpointReason::periodic),
            std::vector<std::string>{run.id});
  EXPECT_EQ(store.batches()[0].runs.size(), 1u);
  EXPECT_TRUE(store.batches()[0].keep_objects);
  for (const auto& batch : store.batches()) EXPECT_TRUE(batch.lease_until.has_value());
  EXPECT_TRUE(run.checkpoint.last_commit.has_value());
  EXPECT_TRUE(store.lease_holds().empty());  // the pushes renew it
}

// A push the results repo's rules refuse is no other owner: the run goes on,
// and its push is tried again after 0, 1, 3, 7 skipped ticks, so that a
// declining hook is not hammered; a landed push ends the backoff.
TEST_F(RunSupervisorTest, ARefusedRunIsPushedAgainAtDoublingTickIntervals) {
  ready_supervisor();
  inflight::Run& run = submit(kSleeper);
  ASSERT_TRUE(wait_for([&] { return started(run); }));
  store.answer_saves_of(run.id, Answer::refused);
  supervisor().checkpoints().start_periodic_checkpoints(milliseconds(10), &lease);
  const auto ticks_with_run = [&] {
    std::vector<std::size_t> ticks;
    for (std::size_t i = 0; i < store.batches().size(); ++i)
      if (!store.batches()[i].runs.empty()) ticks.push_back(i);
    return ticks;
  };
  ASSERT_TRUE(wait_for([&] { return supervisor().checkpoints().pushes().failed >= 4; }));
  const auto ticks = ticks_with_run();
  ASSERT_GE(ticks.size(), 4u);
  EXPECT_EQ(std::vector<std::size_t>(ticks.begin(), ticks.begin() + 4),
            (std::vector<std::size_t>{0, 1, 3, 7}));
  EXPECT_EQ(run.status(), RunStatus::running);
  EXPECT_FALSE(run.lifecycle.fenced());
  EXPECT_EQ(run.checkpoint.error, "pre-receive hook declined");
  EXPECT_EQ(supervisor().checkpoints().pushes().fenced, 0u);

  store.answer_saves_of(run.id, Answer::land);
  ASSERT_TRUE(wait_for([&] { return run.checkpoint.last_commit.has_value(); }));
  EXPECT_FALSE(run.checkpoint.error.has_value());
}

TEST_F(RunSupervisorTest, ADiskThatCannotCheckpointRefusesSubmitsUntilACheckPasses) {
  ready_supervisor();
  inflight::Run& run = submit(kSleeper);
  store.answer_next(Step::save, Answer::disk_failed);
  store.answer_next(Step::check, Answer::fail);
  bool answered = false;
  supervisor().checkpoints().checkpoint(run, checkpoint::CheckpointReason::manual,
                                        SteadyClock::now() + std::chrono::seconds(60),
                                        [&](const CheckpointResult&) { answered = true; });
  ASSERT_TRUE(wait_for([&] { return answered; }));
  const auto refused = supervisor().submit(kSleeper);
  EXPECT_EQ(refused.http_status, 503);
  EXPECT_EQ(refused.error_code, "cannot_checkpoint");

  // The first check fails, the second lands.
  ASSERT_TRUE(wait_for([&] { return !supervisor().disk_health().problem(); }));
  EXPECT_EQ(store.checks(), 2);
  EXPECT_EQ(supervisor().submit(kSleeper).http_status, 202);
}

TEST_F(RunSupervisorTest, AChildKilledByOthersIsResumedAtOnceWithItsResumeArguments) {
  ready_supervisor();
  inflight::Run& run = submit(kSleeper);
  ASSERT_TRUE(wait_for([&] { return started(run); }));
  std::filesystem::remove(run.dir / "started");
  ::kill(run.process->leader(), SIGKILL);  // the OOM killer, say
  ASSERT_TRUE(wait_for([&] { return run.attempts() == 2 && started(run); }));

  EXPECT_EQ(run.params.attempts[0].outcome, "crashed");
  EXPECT_EQ(run.status(), RunStatus::running);
  EXPECT_EQ(run.params.argv.back(), "resumed");
  EXPECT_TRUE(store.releases().empty());
}

}  // namespace
}  // namespace inflight
