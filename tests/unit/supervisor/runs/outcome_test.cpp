#include "inflight/supervisor/runs/outcome.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

namespace inflight {
namespace {

// The native status of a real child, so the classification reads what the
// kernel reports rather than hand-made bit patterns.
int wait_status_of(void (*body)()) {
  const pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(99);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(Outcome, ExitZeroSucceeds) {
  const auto status = decode_wait_status(wait_status_of([] { _exit(0); }));
  EXPECT_EQ(classify(status, StopCause::none), Outcome::succeeded);
}

// A tool that pauses on our signal and exits 0 has work left: resumed, never
// published as finished.
TEST(Outcome, ExitZeroAfterOurShutdownSignalIsInterrupted) {
  const auto status = decode_wait_status(wait_status_of([] { _exit(0); }));
  EXPECT_EQ(classify(status, StopCause::shutdown), Outcome::interrupted);
  EXPECT_TRUE(is_resumable(classify(status, StopCause::shutdown)));
}

TEST(Outcome, ExitZeroAfterAStopThroughTheApiIsCancelled) {
  const auto status = decode_wait_status(wait_status_of([] { _exit(0); }));
  EXPECT_EQ(classify(status, StopCause::cancel), Outcome::cancelled);
}

// Regression: an eval that calls exit(15) by itself must not be mistaken for
// one that was killed by SIGTERM.
TEST(Outcome, Exit15IsFailedNotInterrupted) {
  const auto status = decode_wait_status(wait_status_of([] { _exit(15); }));
  EXPECT_EQ(status.exit_code, 15);
  EXPECT_FALSE(status.signal.has_value());
  EXPECT_EQ(classify(status, StopCause::none), Outcome::failed);
}

TEST(Outcome, DeathBySigtermWeSentIsInterrupted) {
  const auto status = decode_wait_status(wait_status_of([] { raise(SIGTERM); }));
  EXPECT_EQ(status.signal, SIGTERM);
  EXPECT_FALSE(status.exit_code.has_value());
  EXPECT_EQ(classify(status, StopCause::shutdown), Outcome::interrupted);
}

TEST(Outcome, Exit143AfterOurSigtermIsInterrupted) {
  const auto status = decode_wait_status(wait_status_of([] { _exit(143); }));
  EXPECT_EQ(classify(status, StopCause::shutdown), Outcome::interrupted);
}

TEST(Outcome, SignalWeDidNotSendIsCrashed) {
  const auto status = decode_wait_status(wait_status_of([] { raise(SIGKILL); }));
  EXPECT_EQ(classify(status, StopCause::none), Outcome::crashed);
}

TEST(Outcome, StopThroughTheApiIsCancelled) {
  const auto status = decode_wait_status(wait_status_of([] { raise(SIGTERM); }));
  EXPECT_EQ(classify(status, StopCause::cancel), Outcome::cancelled);
}

TEST(Outcome, OnlyInterruptedCrashedAndDeferredAreResumable) {
  EXPECT_TRUE(is_resumable(Outcome::interrupted));
  EXPECT_TRUE(is_resumable(Outcome::crashed));
  EXPECT_TRUE(is_resumable(Outcome::deferred));
  EXPECT_FALSE(is_resumable(Outcome::succeeded));
  EXPECT_FALSE(is_resumable(Outcome::failed));
  EXPECT_FALSE(is_resumable(Outcome::cancelled));
  for (auto o : kAllOutcomes) EXPECT_EQ(outcome_from_string(to_string(o)), o);
}

TEST(Outcome, ARetryExitCodeIsDeferredOnlyWhenTheChildExitedByItself) {
  const int retry[] = {75, 99};
  const auto exited_75 = decode_wait_status(wait_status_of([] { _exit(75); }));
  EXPECT_EQ(classify(exited_75, StopCause::none, retry), Outcome::deferred);
  EXPECT_EQ(classify(exited_75, StopCause::none), Outcome::failed);
  EXPECT_EQ(classify(exited_75, StopCause::shutdown, retry), Outcome::interrupted);
  EXPECT_EQ(classify(exited_75, StopCause::cancel, retry), Outcome::cancelled);
  const auto exited_76 = decode_wait_status(wait_status_of([] { _exit(76); }));
  EXPECT_EQ(classify(exited_76, StopCause::none, retry), Outcome::failed);
}

}  // namespace
}  // namespace inflight
