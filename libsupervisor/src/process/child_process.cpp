#include "inflight/supervisor/process/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/process/v2/environment.hpp>
#include <boost/process/v2/process.hpp>
#include <boost/process/v2/start_dir.hpp>
#include <boost/process/v2/stdio.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <system_error>

#include "inflight/core/fd.hpp"
#include "inflight/core/log.hpp"
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

namespace {

namespace fs = std::filesystem;

// The attempt's own cgroup under serve's; an existing one (left by an attempt
// whose shim was killed) is used again. None when it cannot be made: the shim
// still ends the attempt's processes, found through /proc.
std::optional<fs::path> make_attempt_cgroup(const Containment& containment,
                                            const std::string& name) {
  if (!containment.cgroup_parent) return std::nullopt;
  auto dir = *containment.cgroup_parent / name;
  std::error_code ec;
  fs::create_directory(dir, ec);
  if (!ec) return dir;
  log::warn("attempt started without a cgroup of its own; the run shim alone contains it",
            {{"cgroup", dir.string()}, {"error", ec.message()}});
  return std::nullopt;
}

// What the shim writes once it tried the exec (apps/run-shim/main.cpp).
struct ShimReport {
  std::int32_t leader = 0;
  std::int32_t error = 0;  // errno of the child's exec; 0: started
};

// How long the shim may take to fork, contain and exec the child before the
// attempt counts as not started; the event loop waits for it.
constexpr std::chrono::milliseconds kShimReportDeadline{10'000};

// Blocks for the few milliseconds the shim needs to fork and exec, as the
// launcher itself waits for the shim's exec; never past the deadline, however
// often a signal interrupts the wait.
ShimReport read_report(int control) {
  const auto deadline = std::chrono::steady_clock::now() + kShimReportDeadline;
  ShimReport report;
  std::size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(&report);
  while (got < sizeof report) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd ready{control, POLLIN, 0};
    const int polled = ::poll(&ready, 1, static_cast<int>(std::max<long>(left.count(), 0)));
    if (polled < 0 && errno == EINTR) continue;
    if (polled == 0) return {0, ETIMEDOUT};
    const auto n = ::read(control, bytes + got, sizeof report - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return {0, n == 0 ? ECHILD : errno};  // the shim ended before its report
    got += static_cast<std::size_t>(n);
  }
  return report;
}

std::vector<std::string> shim_argv(const Containment& containment,
                                   const std::optional<fs::path>& cgroup, const ChildSpec& spec,
                                   const std::vector<fs::path>& hidden_files) {
  std::vector<std::string> argv{containment.shim.string(), "--parent", std::to_string(::getpid())};
  if (cgroup) argv.insert(argv.end(), {"--cgroup", cgroup->string()});
  for (const auto& file : hidden_files) argv.insert(argv.end(), {"--hide", file.string()});
  argv.push_back("--");
  argv.push_back(resolve_program(spec.argv.front()).string());
  argv.insert(argv.end(), spec.argv.begin() + 1, spec.argv.end());
  return argv;
}

void send_command(int control, int signal) {
  const auto byte = static_cast<unsigned char>(signal);
  ::send(control, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

ContainedChild spawn_contained(boost::asio::io_context& io, ChildSpec spec,
                               const Containment& containment, const std::string& cgroup_name,
                               const std::vector<fs::path>& hidden_files) {
  const auto program = spec.argv.front();
  auto cgroup = make_attempt_cgroup(containment, cgroup_name);
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    throw std::system_error(errno, std::generic_category(), "socketpair");
  Fd control(fds[0]);
  Fd shim_end(fds[1]);
  spec.argv = shim_argv(containment, cgroup, spec, hidden_files);
  spec.stdin_fd = shim_end.get();
  const pid_t shim = spawn_child(io, spec);
  shim_end.reset();
  const auto report = read_report(control.get());
  if (report.error == 0)
    return ContainedChild(shim, report.leader, std::move(control), std::move(cgroup));
  // The shim ends at once after a failed exec. One that missed its deadline
  // is ended here (what it started is the caller's to end, see
  // ChildReaper::end_strays); reaped here, it is no orphan.
  ::kill(shim, SIGKILL);
  ::waitpid(shim, nullptr, 0);
  ContainedChild(shim, report.leader, std::move(control), std::move(cgroup)).clean_up();
  throw std::system_error(report.error, std::generic_category(), program);
}

void ContainedChild::signal(int signal) const {
  send_command(control_.get(), signal);
}

void ContainedChild::end() const {
  send_command(control_.get(), SIGKILL);
}

void ContainedChild::clean_up() const {
  if (!cgroup_) return;
  std::error_code ec;
  if (!fs::exists(*cgroup_, ec)) return;
  if (const Fd kill(::open((*cgroup_ / "cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC)); kill)
    (void)::write(kill.get(), "1", 1);
  fs::remove(*cgroup_, ec);
}

}  // namespace inflight
