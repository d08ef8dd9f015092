// What the tests of RunSupervisor, ShutdownPlan and Restoration share: one
// event loop, a reaper, the in-memory store and a supervisor whose children
// are real, tiny processes (/bin/sh, /bin/sleep) in a temporary runs dir.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "inflight/core/child_templates.hpp"
#include "inflight/supervisor/process/child_reaper.hpp"
#include "inflight/supervisor/runs/run_supervisor.hpp"
#include "supervisor/memory_checkpoints.hpp"
#include "supervisor/run_until.hpp"
#include "temp_dir.hpp"

namespace inflight {

// `default` exits with the code asked for; `sleeper` runs until signalled;
// `stubborn` ignores SIGTERM. The last two mark their start in the run dir,
// and a resumed attempt gets `resumed` as its last argument.
inline ChildTemplates test_templates() {
  return ChildTemplates::from_config(OrderedJson::parse(R"({
    "child": {
      "argv": ["/bin/sh", "-c", "exit $0", "{code}"],
      "params": {"code": {"type": "integer", "min": 0, "max": 255, "default": 0}}
    },
    "children": {
      "sleeper": {
        "argv": ["/bin/sh", "-c", "touch \"$0/started\"; exec sleep 60", "{output_dir}"],
        "resume_argv": ["resumed"]
      },
      "stubborn": {
        "argv": ["/bin/sh", "-c", "trap '' TERM; touch \"$0/started\"; exec sleep 60",
                 "{output_dir}"]
      }
    }
  })"),
                                     "/nonexistent/inflight-demo-eval");
}

class SupervisorFixture : public ::testing::Test {
 protected:
  // Before the members of a derived fixture go: a child's exit may call them.
  // As at a shutdown, so that no killed child is resumed.
  void TearDown() override {
    if (!supervisor_) return;
    supervisor_->begin_shutdown();
    supervisor_->kill_remaining();
    run_until(io, [this] { return supervisor_->live_children() == 0; });
  }

  SupervisorSettings settings() const {
    return {.runs_dir = runs.path(),
            .pod_name = "pod-a",
            .max_concurrent = 4,
            .max_attempts = 3,
            .max_interruptions = 50,
            .max_queued = 1000,
            .stop_grace = std::chrono::seconds(10),
            .network_timeout = std::chrono::seconds(60),
            .disk_recheck = std::chrono::milliseconds(10),
            .echo_output = false,
            .containment = choose_containment(ContainmentMode::shim),
            .hidden_files = {}};
  }
  // The supervisor, made with `settings()` on first use unless made here.
  RunSupervisor& supervisor() { return supervisor_ ? *supervisor_ : make_supervisor(settings()); }
  // A supervisor as serve makes it, restored: a finished run's release steps
  // ride the periodic pushes.
  RunSupervisor& serve_supervisor(bool publish) {
    auto with = settings();
    with.publish = publish;
    with.release_at_ticks = true;
    auto& made = make_supervisor(with);
    made.finish_restore();
    return made;
  }
  RunSupervisor& make_supervisor(SupervisorSettings with) {
    supervisor_ = std::make_unique<RunSupervisor>(io, reaper, store, std::move(with), templates);
    return *supervisor_;
  }
  // A supervisor past its restore, ready to start runs.
  RunSupervisor& ready_supervisor() {
    supervisor().finish_restore();
    return supervisor();
  }

  inflight::Run& submit(const OrderedJson& body) {
    const auto result = supervisor().submit(body);
    EXPECT_EQ(result.http_status, 202) << result.message;
    if (!result.run) throw std::runtime_error("not accepted: " + result.message);
    return *result.run;
  }
  bool wait_for(const std::function<bool()>& effect,
                std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    return run_until(io, effect, limit);
  }
  bool started(const inflight::Run& run) const {
    return std::filesystem::exists(run.dir / "started");
  }

  boost::asio::io_context io;
  ChildReaper reaper{io};
  MemoryCheckpoints store{io};
  TempDir runs;
  ChildTemplates templates = test_templates();

 private:
  std::unique_ptr<RunSupervisor> supervisor_;
};

}  // namespace inflight
