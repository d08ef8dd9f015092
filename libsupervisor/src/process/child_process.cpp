#include "inflight/supervisor/process/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <boost/process/v2/environment.hpp>
#include <boost/process/v2/process.hpp>
#include <boost/process/v2/start_dir.hpp>
#include <boost/process/v2/stdio.hpp>
#include <cerrno>
#include <system_error>

#include "inflight/core/fd.hpp"
#include "inflight/core/program_path.hpp"

namespace inflight {

namespace bp = boost::process::v2;

namespace {

// Runs in the forked child before exec: the state a fresh program expects,
// whatever the supervisor has blocked or handled.
struct CleanChildState {
  template <typename Launcher>
  bp::error_code on_exec_setup(Launcher&, const bp::filesystem::path&, const char* const*&) {
    if (::setpgid(0, 0) != 0) return {errno, bp::system_category()};
    for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    return {};
  }

  // The launcher would call exit(), running the supervisor's atexit handlers
  // and flushing its stdio buffers a second time; leave without them.
  template <typename Launcher>
  void on_exec_error(Launcher&, const bp::filesystem::path&, const char* const*&,
                     const bp::error_code&) {
    ::_exit(127);
  }
};

// Blocks every signal for its lifetime; the previous mask comes back after.
class SignalsBlocked {
 public:
  SignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &previous_);
  }
  ~SignalsBlocked() { ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  SignalsBlocked(const SignalsBlocked&) = delete;
  SignalsBlocked& operator=(const SignalsBlocked&) = delete;

 private:
  sigset_t previous_;
};

bp::filesystem::path resolve_program(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  auto found = find_on_path(program);
  if (!found) throw std::system_error(ENOENT, std::generic_category(), program);
  return found->string();
}

}  // namespace

pid_t spawn_child(boost::asio::io_context& io, const ChildSpec& spec) {
  const auto program = resolve_program(spec.argv.front());
  const std::vector<std::string> args(spec.argv.begin() + 1, spec.argv.end());
  Fd null_input;
  int input = spec.stdin_fd;
  if (input < 0) {
    null_input = Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    input = null_input.get();
  }
  // Every signal is blocked from before fork until the child has reset its
  // mask and dispositions (CleanChildState): until then the child would run
  // the supervisor's handlers, which write into the supervisor's signal pipe.
  const SignalsBlocked blocked;
  try {
    bp::process child(io, program, args, bp::process_start_dir{spec.cwd.string()},
                      bp::process_environment{spec.env},
                      bp::process_stdio{input, spec.stdout_fd, spec.stderr_fd}, CleanChildState{});
    // The reaper owns the wait; the handle must not kill the child when it goes.
    const pid_t pid = child.id();
    child.detach();
    return pid;
  } catch (const boost::system::system_error& e) {
    // The child's exec failed (its errno comes back through the launcher's
    // pipe): one exception type for callers, whatever the library threw.
    throw std::system_error(std::error_code(e.code()), program.string());
  }
}

void signal_group(pid_t pgid, int signal) {
  if (pgid > 1) ::kill(-pgid, signal);
}

}  // namespace inflight
