// The run's two tables: every allowed transition is walked, and every
// (state, event) pair without a row is refused and changes nothing.
#include "inflight/supervisor/runs/run_lifecycle.hpp"

#include <gtest/gtest.h>

#include <set>
#include <utility>

namespace inflight {
namespace {

constexpr RunState kStates[] = {RunState::queued,   RunState::deferred,    RunState::starting,
                                RunState::running,  RunState::cancelling,  RunState::stopping,
                                RunState::fencing,  RunState::interrupted, RunState::held,
                                RunState::fenced,   RunState::succeeded,   RunState::failed,
                                RunState::cancelled};

constexpr RunEvent kEvents[] = {RunEvent::start,        RunEvent::spawned,   RunEvent::stop,
                                RunEvent::shut_down,    RunEvent::fence,     RunEvent::hold,
                                RunEvent::backoff_over, RunEvent::succeed,   RunEvent::fail,
                                RunEvent::cancelled,    RunEvent::interrupt, RunEvent::retry,
                                RunEvent::defer};

constexpr ReleaseStep kSteps[] = {ReleaseStep::none,  ReleaseStep::final_state,
                                  ReleaseStep::index, ReleaseStep::deletion,
                                  ReleaseStep::done,  ReleaseStep::lost};

constexpr ReleaseEvent kReleaseEvents[] = {ReleaseEvent::begin,    ReleaseEvent::final_saved,
                                           ReleaseEvent::landed,   ReleaseEvent::indexed,
                                           ReleaseEvent::released, ReleaseEvent::lost};

// A lifecycle whose release stands at `step`, reached through the table.
RunLifecycle at_step(ReleaseStep step) {
  RunLifecycle lifecycle(RunState::succeeded);
  const auto go = [&](ReleaseEvent event) { EXPECT_TRUE(lifecycle.apply(event)); };
  switch (step) {
    case ReleaseStep::none:
      break;
    case ReleaseStep::final_state:
      go(ReleaseEvent::begin);
      break;
    case ReleaseStep::index:
      go(ReleaseEvent::begin);
      go(ReleaseEvent::landed);
      break;
    case ReleaseStep::deletion:
      go(ReleaseEvent::begin);
      go(ReleaseEvent::indexed);
      break;
    case ReleaseStep::done:
      go(ReleaseEvent::begin);
      go(ReleaseEvent::released);
      break;
    case ReleaseStep::lost:
      go(ReleaseEvent::lost);
      break;
  }
  EXPECT_EQ(lifecycle.release_step(), step);
  return lifecycle;
}

TEST(RunLifecycleTest, EveryRowOfTheRunTableIsTaken) {
  for (const auto& row : run_transitions()) {
    RunLifecycle lifecycle(row.from);
    EXPECT_TRUE(lifecycle.apply(row.event)) << to_string(row.from) << " + " << to_string(row.event);
    EXPECT_EQ(lifecycle.state(), row.to) << to_string(row.from) << " + " << to_string(row.event);
  }
}

TEST(RunLifecycleTest, EveryPairWithoutARowIsRefusedAndChangesNothing) {
  std::set<std::pair<RunState, RunEvent>> allowed;
  for (const auto& row : run_transitions())
    EXPECT_TRUE(allowed.emplace(row.from, row.event).second) << "two rows for one pair";
  int refused = 0;
  for (const auto state : kStates)
    for (const auto event : kEvents) {
      if (allowed.contains({state, event})) continue;
      RunLifecycle lifecycle(state);
      EXPECT_FALSE(lifecycle.apply(event)) << to_string(state) << " + " << to_string(event);
      EXPECT_EQ(lifecycle.state(), state);
      ++refused;
    }
  EXPECT_EQ(refused + allowed.size(), std::size(kStates) * std::size(kEvents));
}

TEST(RunLifecycleTest, EveryRowOfTheReleaseTableIsTaken) {
  for (const auto& row : release_transitions()) {
    auto lifecycle = at_step(row.from);
    EXPECT_TRUE(lifecycle.apply(row.event)) << to_string(row.from) << " + " << to_string(row.event);
    EXPECT_EQ(lifecycle.release_step(), row.to)
        << to_string(row.from) << " + " << to_string(row.event);
  }
}

TEST(RunLifecycleTest, EveryReleasePairWithoutARowIsRefusedAndChangesNothing) {
  std::set<std::pair<ReleaseStep, ReleaseEvent>> allowed;
  for (const auto& row : release_transitions())
    EXPECT_TRUE(allowed.emplace(row.from, row.event).second) << "two rows for one pair";
  for (const auto step : kSteps)
    for (const auto event : kReleaseEvents) {
      if (allowed.contains({step, event})) continue;
      auto lifecycle = at_step(step);
      EXPECT_FALSE(lifecycle.apply(event)) << to_string(step) << " + " << to_string(event);
      EXPECT_EQ(lifecycle.release_step(), step);
    }
}

TEST(RunLifecycleTest, EveryStateHasAWordAndShowsAStatus) {
  std::set<std::string_view> words;
  for (const auto state : kStates) {
    EXPECT_FALSE(to_string(state).empty());
    words.insert(to_string(state));
  }
  EXPECT_EQ(words.size(), std::size(kStates));
  EXPECT_EQ(RunLifecycle(RunState::deferred).status(), RunStatus::queued);
  EXPECT_EQ(RunLifecycle(RunState::fencing).status(), RunStatus::stopping);
  EXPECT_EQ(RunLifecycle(RunState::held).status(), RunStatus::interrupted);
  EXPECT_EQ(RunLifecycle(RunState::fenced).status(), RunStatus::interrupted);
}

// classify() reads the stop's cause: a cancel ends cancelled, a shutdown or
// a fence interrupted.
TEST(RunLifecycleTest, AStoppingStateNamesItsCause) {
  EXPECT_EQ(RunLifecycle(RunState::running).stop_cause(), StopCause::none);
  EXPECT_EQ(RunLifecycle(RunState::cancelling).stop_cause(), StopCause::cancel);
  EXPECT_EQ(RunLifecycle(RunState::stopping).stop_cause(), StopCause::shutdown);
  EXPECT_EQ(RunLifecycle(RunState::fencing).stop_cause(), StopCause::shutdown);
}

// A run that is over and loses its release is fenced, and keeps its state.
TEST(RunLifecycleTest, ALostReleaseFencesARunThatIsOver) {
  RunLifecycle lifecycle(RunState::failed);
  ASSERT_TRUE(lifecycle.apply(ReleaseEvent::begin));
  EXPECT_TRUE(lifecycle.release_pending());
  ASSERT_TRUE(lifecycle.apply(ReleaseEvent::lost));
  EXPECT_TRUE(lifecycle.fenced());
  EXPECT_FALSE(lifecycle.release_pending());
  EXPECT_EQ(lifecycle.state(), RunState::failed);
}

TEST(RunLifecycleTest, AFinalStateSavedAloneHasLanded) {
  RunLifecycle lifecycle(RunState::succeeded);
  ASSERT_TRUE(lifecycle.apply(ReleaseEvent::begin));
  EXPECT_FALSE(lifecycle.final_landed());
  ASSERT_TRUE(lifecycle.apply(ReleaseEvent::final_saved));
  EXPECT_TRUE(lifecycle.final_landed());
  EXPECT_EQ(lifecycle.release_step(), ReleaseStep::final_state);
}

TEST(RunLifecycleTest, AFinalStatusWordReadBackIsAnEnd) {
  EXPECT_EQ(final_state_named("succeeded"), RunState::succeeded);
  EXPECT_EQ(final_state_named("cancelled"), RunState::cancelled);
  EXPECT_EQ(final_state_named("failed"), RunState::failed);
  EXPECT_EQ(final_state_named("running"), RunState::failed);
  EXPECT_EQ(final_state_named(""), RunState::failed);
}

}  // namespace
}  // namespace inflight
