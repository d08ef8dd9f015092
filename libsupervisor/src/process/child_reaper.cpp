#include "inflight/supervisor/process/child_reaper.hpp"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <system_error>
#include <vector>

#include "inflight/core/log.hpp"
#include "inflight/core/process_tree.hpp"

namespace inflight {

ChildReaper::ChildReaper(boost::asio::io_context& io) : sigchld_(io, SIGCHLD) {
  arm();
  // A child may have ended before the signal set existed.
  reap_all();
}

void ChildReaper::watch(pid_t pid, ExitHandler on_exit) {
  watched_[pid] = std::move(on_exit);
}

void ChildReaper::end_strays() const {
  std::vector<pid_t> spared;
  spared.reserve(watched_.size());
  for (const auto& [pid, handler] : watched_) spared.push_back(pid);
  std::vector<Fd> exits;
  kill_descendants(::getpid(), spared, read_process_links, &exits);
  // A SIGKILL is obeyed a moment after it is sent: the attempt is reported
  // ended once its strays are, not while one still runs. This path is rare
  // (a shim killed itself), and a killed process ends within microseconds
  // unless the kernel holds it in a disk wait: bounded.
  if (!exits.empty() && !wait_ended(exits, kStrayEndLimit))
    log::warn("a process of an ended attempt is still there after SIGKILL",
              {{"processes", exits.size()}});
}

void ChildReaper::become_subreaper() {
  if (::getpid() == 1) return;
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    throw std::system_error(errno, std::generic_category(), "prctl(PR_SET_CHILD_SUBREAPER)");
}

void ChildReaper::arm() {
  sigchld_.async_wait([this](const boost::system::error_code& ec, int) {
    if (ec) return;
    reap_all();
    arm();
  });
}

// SIGCHLD coalesces, so one delivery may stand for many exits.
void ChildReaper::reap_all() {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    const auto it = watched_.find(pid);
    if (it == watched_.end()) {
      ++orphans_reaped_;
      continue;
    }
    auto handler = std::move(it->second);
    watched_.erase(it);
    handler(status);
  }
}

}  // namespace inflight
