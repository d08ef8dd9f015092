// Starting a child process: its own process group, a clean signal mask and
// default signal dispositions, whatever the supervisor blocks or handles.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

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

}  // namespace inflight
