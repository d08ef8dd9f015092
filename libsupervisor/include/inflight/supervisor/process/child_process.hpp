// Starting a child process: its own process group, a clean signal mask and
// default signal dispositions, whatever the supervisor blocks or handles. A
// run's child starts under the run shim, which ends every process it started
// (docs/security.md "Process containment").
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "inflight/core/fd.hpp"
#include "inflight/supervisor/process/containment.hpp"

namespace inflight {

struct ChildSpec {
  std::vector<std::string> argv;
  std::filesystem::path cwd;
  std::vector<std::string> env;  // NAME=value
  int stdin_fd = -1;             // -1: /dev/null
  int stdout_fd = -1;
  int stderr_fd = -1;
};

// Returns the child's pid, which is also its process group id. Throws
// std::system_error when the program cannot be started (not found, not
// executable): the error is that of the failed exec.
pid_t spawn_child(boost::asio::io_context& io, const ChildSpec& spec);

// Signals a whole process group; a group that is already gone is not an error.
void signal_group(pid_t pgid, int signal);

// A run attempt's child under its run shim, which serve commands through a
// socket: closing it (serve's exit, even by SIGKILL) ends every process of
// the attempt too.
class ContainedChild {
 public:
  ContainedChild(pid_t shim, pid_t leader, Fd control, std::optional<std::filesystem::path> cgroup)
      : shim_(shim), leader_(leader), control_(std::move(control)), cgroup_(std::move(cgroup)) {}

  // The shim's pid: the one to watch. It exits as the leader did, once no
  // process of the attempt is left.
  pid_t shim() const { return shim_; }
  // The child's pid, which is also its process group id.
  pid_t leader() const { return leader_; }
  // `signal` to the child's process group.
  void signal(int signal) const;
  // SIGKILL to every process of the attempt, however it left the group.
  void end() const;
  // After the shim's exit: the attempt's cgroup, emptied and removed. (No
  // group kill: the leader's pid may already name another process.)
  void clean_up() const;

 private:
  pid_t shim_;
  pid_t leader_;
  Fd control_;
  std::optional<std::filesystem::path> cgroup_;
};

// Starts `spec` under the run shim of `containment`, in a cgroup of its own
// named `cgroup_name` when containment has cgroups, with `hidden_files`
// hidden from it where the kernel allows (docs/security.md "Process containment").
// Throws std::system_error when the child cannot be started, with the error
// of its failed exec.
ContainedChild spawn_contained(boost::asio::io_context& io, ChildSpec spec,
                               const Containment& containment, const std::string& cgroup_name,
                               const std::vector<std::filesystem::path>& hidden_files);

}  // namespace inflight
