// The event loop of a command that supervises children in the foreground:
// `serve`, `resume`, and the commands to come. It owns the io_context, the
// reaper of every child and the SIGTERM/SIGINT handling. Both signals are
// queued from its construction on, so that one that arrives while the
// command starts is handled once the command is ready for it (docs/serve.md "Shutdown"), never left
// to the default action that would kill the children's supervisor before it checkpointed them.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <functional>

#include "inflight/supervisor/process/child_reaper.hpp"

namespace inflight {

class CommandLoop {
 public:
  // Makes this process the subreaper of its descendants (ChildReaper).
  CommandLoop();
  CommandLoop(const CommandLoop&) = delete;
  CommandLoop& operator=(const CommandLoop&) = delete;

  boost::asio::io_context& io() { return io_; }
  ChildReaper& reaper() { return reaper_; }

  // Calls `handler` on the loop with every SIGTERM and SIGINT, in order,
  // those queued before this call included. A later call replaces it.
  void on_signal(std::function<void(int signal)> handler);
  // Runs the loop (run_event_loop) until stop() or until it runs out of work.
  void run();
  void stop() { io_.stop(); }

 private:
  void await_signal();

  boost::asio::io_context io_;
  boost::asio::signal_set signals_;
  ChildReaper reaper_;
  std::function<void(int signal)> on_signal_;
};

}  // namespace inflight
