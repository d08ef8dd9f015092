// Every child of this process is reaped here: watched children have their
// native wait status delivered to a handler, anything else (an orphan that was
// reparented to us as subreaper or PID 1) is reaped and counted.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <unordered_map>

namespace inflight {

class ChildReaper {
 public:
  using ExitHandler = std::function<void(int wait_status)>;

  explicit ChildReaper(boost::asio::io_context& io);

  // Call right after spawning, before returning to the event loop.
  void watch(pid_t pid, ExitHandler on_exit);
  std::uint64_t orphans_reaped() const { return orphans_reaped_; }

  // SIGKILL to every process below this one that no watched child is or is
  // above: what a run shim that was killed itself left behind. A stray that
  // forks meanwhile leaves an orphan that comes here too, and is ended at
  // the next call.
  // Returns once they ended, or after kStrayEndLimit.
  void end_strays() const;
  static constexpr std::chrono::milliseconds kStrayEndLimit{1000};

  // Makes orphaned descendants ours to reap (no-op as PID 1, which gets them anyway).
  static void become_subreaper();

 private:
  void arm();
  void reap_all();

  boost::asio::signal_set sigchld_;
  std::unordered_map<pid_t, ExitHandler> watched_;
  std::uint64_t orphans_reaped_ = 0;
};

}  // namespace inflight
