#include "inflight/supervisor/lifecycle/command_loop.hpp"

#include <csignal>

#include "inflight/supervisor/process/event_loop.hpp"

namespace inflight {

CommandLoop::CommandLoop() : signals_(io_, SIGTERM, SIGINT), reaper_(io_) {
  ChildReaper::become_subreaper();
  // A write to an agent that already exited (its stdin closed) must fail as
  // a write, not end the supervisor; children get SIG_DFL back at spawn.
  ::signal(SIGPIPE, SIG_IGN);
}

void CommandLoop::on_signal(std::function<void(int signal)> handler) {
  const bool waiting = static_cast<bool>(on_signal_);
  on_signal_ = std::move(handler);
  if (!waiting) await_signal();
}

void CommandLoop::run() {
  run_event_loop(io_);
}

void CommandLoop::await_signal() {
  signals_.async_wait([this](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    on_signal_(signal);
    await_signal();
  });
}

}  // namespace inflight
