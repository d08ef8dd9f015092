// The AttemptRunner alone: real, tiny children under the run shim, their
// outcomes reported, nothing decided about what follows.
#include "inflight/supervisor/runs/attempt_runner.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>

#include "supervisor/supervisor_fixture.hpp"

namespace inflight {
namespace {

class AttemptRunnerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (auto* run : {&run_a, &run_b})
      if (*run && (*run)->process) (*run)->process->end();
    run_until(io, [this] { return (!run_a || !run_a->process) && (!run_b || !run_b->process); });
  }

  inflight::Run& make(std::optional<inflight::Run>& slot, const std::string& id,
                      const std::string& child, OrderedJson request = OrderedJson::object()) {
    checkpoint::RunParams params;
    params.run_id = id;
    params.request = std::move(request);
    std::filesystem::create_directories(runs.path() / id);
    slot.emplace(id, runs.path() / id, std::move(params), io);
    slot->child = templates.find(child);
    return *slot;
  }

  boost::asio::io_context io;
  ChildReaper reaper{io};
  TempDir runs;
  ChildTemplates templates = test_templates();
  std::optional<inflight::Run> run_a, run_b;
  std::vector<std::pair<std::string, Outcome>> ended;
  AttemptRunner runner{io, reaper,
                       AttemptSettings{.pod_name = "pod-a",
                                       .stop_grace = std::chrono::milliseconds(200),
                                       .echo_output = false,
                                       .containment = choose_containment(ContainmentMode::shim),
                                       .hidden_files = {}},
                       [this](inflight::Run& run, Outcome outcome) {
                         run.process.reset();
                         ended.emplace_back(run.id, outcome);
                       }};
};

TEST_F(AttemptRunnerTest, AnAttemptIsRecordedStartedAndItsExitReported) {
  inflight::Run& run = make(run_a, "r-1", "default", {{"code", 3}});
  ASSERT_TRUE(runner.start(run));
  EXPECT_EQ(run.lifecycle.state(), RunState::running);
  ASSERT_EQ(run.attempts(), 1);
  EXPECT_EQ(run.params.attempts[0].pod, "pod-a");
  ASSERT_TRUE(run_until(io, [&] { return !ended.empty(); }));
  EXPECT_EQ(ended[0], std::make_pair(std::string("r-1"), Outcome::failed));
  EXPECT_EQ(run.params.attempts[0].exit_code, 3);
  // The runner decides nothing: the run stays where the exit left it.
  EXPECT_EQ(run.lifecycle.state(), RunState::running);
}

TEST_F(AttemptRunnerTest, AStopEndsTheChildAsCancelledAndAFenceAsInterrupted) {
  inflight::Run& cancelled = make(run_a, "r-1", "sleeper");
  inflight::Run& fenced =
      make(run_b, "r-2", "stubborn");  // ignores SIGTERM: killed after the grace
  ASSERT_TRUE(runner.start(cancelled));
  ASSERT_TRUE(runner.start(fenced));
  ASSERT_TRUE(run_until(io, [&] {
    return std::filesystem::exists(cancelled.dir / "started") &&
           std::filesystem::exists(fenced.dir / "started");
  }));
  runner.stop(cancelled, RunEvent::stop);
  runner.stop(fenced, RunEvent::fence);
  EXPECT_EQ(cancelled.lifecycle.state(), RunState::cancelling);
  EXPECT_EQ(fenced.lifecycle.state(), RunState::fencing);
  ASSERT_TRUE(run_until(io, [&] { return ended.size() == 2; }));
  for (const auto& [id, outcome] : ended)
    EXPECT_EQ(outcome, id == "r-1" ? Outcome::cancelled : Outcome::interrupted) << id;
}

TEST_F(AttemptRunnerTest, AProgramThatCannotStartIsReportedInItsAttempt) {
  // As if the program went away after serve checked it.
  templates = ChildTemplates::from_config(
      OrderedJson::parse(R"({"child": {"argv": ["/nonexistent/eval"]}})"), "/nonexistent/demo");
  inflight::Run& run = make(run_a, "r-1", "default");
  EXPECT_FALSE(runner.start(run));
  ASSERT_EQ(run.attempts(), 1);
  EXPECT_EQ(run.params.attempts[0].exit_code, 127);
  ASSERT_TRUE(run.params.attempts[0].error.has_value());
  EXPECT_NE(run.params.attempts[0].error->find("/nonexistent/eval"), std::string::npos);
  EXPECT_TRUE(ended.empty());  // the caller settles it
}

}  // namespace
}  // namespace inflight
