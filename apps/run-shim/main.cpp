// inflight-run-shim: sits between serve and one attempt's child so that every
// process the child starts ends with the attempt, including those that left
// its process group or session, and those of a serve that died by SIGKILL
// (docs/security.md "Process containment").
//
//   inflight-run-shim --parent PID [--cgroup DIR] [--hide FILE]... -- PROGRAM [ARG...]
//
// fd 0 is a socket to serve (PID). Serve writes one byte per command: a
// signal number, sent to the child's process group; SIGKILL ends every
// process of the attempt. End of file means serve is gone: everything ends.
// The shim writes one report back: the child's pid and the errno of its exec
// (0: started). Each --hide FILE is hidden from the child (hidden_files.hpp).
// It exits as the child did: the same exit code, or killed by the same
// signal, once no process of the attempt is left.
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hidden_files.hpp"
#include "inflight/core/process_tree.hpp"

namespace {

// The signal the kernel sends the shim when serve (the thread that forked it) dies.
constexpr int kParentDeathSignal = SIGHUP;

struct Options {
  pid_t parent = 0;
  const char* cgroup = nullptr;   // the attempt's own cgroup, when serve made one
  std::string cgroup_procs;       // its cgroup.procs, made before the fork
  char** argv = nullptr;          // the child's, argv[0] a path
  std::vector<const char*> hide;  // as serve gave them
  inflight::HiddenFiles hidden;   // resolved, before the fork
};

bool parse(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--" && i + 1 < argc) {
      options.argv = argv + i + 1;
      options.hidden = inflight::prepare_hidden_files(options.hide);
      if (options.cgroup != nullptr)
        options.cgroup_procs = std::string(options.cgroup) + "/cgroup.procs";
      return options.parent > 0;
    }
    if (i + 1 >= argc) return false;
    if (arg == "--parent")
      options.parent = static_cast<pid_t>(std::atol(argv[++i]));
    else if (arg == "--cgroup")
      options.cgroup = argv[++i];
    else if (arg == "--hide")
      options.hide.push_back(argv[++i]);
    else
      return false;
  }
  return false;
}

void write_fully(int fd, const void* data, std::size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const auto written = ::write(fd, bytes, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    bytes += written;
    size -= static_cast<std::size_t>(written);
  }
}

// In the forked child, before exec: only system calls from here on (all that
// needs memory was prepared before the fork). Its own process group, the
// attempt's cgroup, the secret files hidden (in a user namespace, once in the
// cgroup), /dev/null for input, no signal blocked; dispositions are the
// defaults serve gave the shim, which sets none.
[[noreturn]] void become_child(const Options& options, pid_t shim, int exec_errors) {
  ::setpgid(0, 0);
  // Should the shim itself be killed, the leader goes with it (what else it
  // started is serve's to end: docs/security.md "Process containment").
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != shim) ::_exit(127);
  int error = 0;
  if (options.cgroup != nullptr) {
    const int fd = ::open(options.cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, "0", 1) != 1) error = errno;
  }
  inflight::hide_files(options.hidden);
  // dup2 clears close-on-exec on fd 0 only: no spare descriptor reaches the child.
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0 || ::dup2(null, 0) < 0) error = error ? error : errno;
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (error == 0) ::execv(options.argv[0], options.argv);
  error = error ? error : errno;
  write_fully(exec_errors, &error, sizeof error);
  ::_exit(127);
}

// Forks the child; returns its pid and the errno of its exec (0: started),
// read from a pipe that a successful exec closes.
std::pair<pid_t, int> start_child(const Options& options) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return {0, errno};
  const pid_t shim = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) become_child(options, shim, pipe_fds[1]);
  ::close(pipe_fds[1]);
  if (pid < 0) {
    ::close(pipe_fds[0]);
    return {0, errno};
  }
  // Both sides set the group, so it exists before serve can signal it.
  ::setpgid(pid, pid);
  int error = 0;
  while (::read(pipe_fds[0], &error, sizeof error) < 0 && errno == EINTR) {
  }
  ::close(pipe_fds[0]);
  return {pid, error};
}

struct Leader {
  pid_t pid = 0;
  bool ended = false;
  int status = 0;
};

void reaped(Leader& leader, pid_t pid, int status) {
  if (pid != leader.pid) return;
  leader.ended = true;
  leader.status = status;
}

// Ends every process below the shim: the cgroup at once when there is one;
// else, and as well, every descendant /proc shows, again after each one
// reaped (a process may have forked before it got the SIGKILL; as child
// subreaper the shim inherits every orphan below it), until none is left.
void end_tree(const Options& options, Leader& leader) {
  if (options.cgroup != nullptr) {
    const std::string kill_file = std::string(options.cgroup) + "/cgroup.kill";
    const int fd = ::open(kill_file.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      write_fully(fd, "1", 1);
      ::close(fd);
    }
  }
  for (;;) {
    inflight::kill_descendants(::getpid());
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;  // ECHILD: nothing left
    reaped(leader, pid, status);
  }
  if (options.cgroup != nullptr) ::rmdir(options.cgroup);
}

// Leaves as the leader did, so that serve tells "exited 15" from "killed by
// SIGTERM"; no core file of the shim's own.
[[noreturn]] void exit_as(const Leader& leader) {
  if (!leader.ended) ::_exit(127);
  if (WIFEXITED(leader.status)) ::_exit(WEXITSTATUS(leader.status));
  const int signal = WTERMSIG(leader.status);
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  ::prctl(PR_SET_DUMPABLE, 0);  // nor one piped to a core handler
  ::signal(signal, SIG_DFL);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, signal);
  ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
  ::kill(::getpid(), signal);
  ::_exit(128 + signal);  // a signal whose default is not to end the process
}

// Reaps what ended; true once the leader has.
bool reap_ended(Leader& leader) {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return leader.ended;
    reaped(leader, pid, status);
  }
}

// Serve's commands; false when serve is gone or asked for the end.
bool obey(int control, pid_t group) {
  unsigned char commands[64];
  const auto got = ::read(control, commands, sizeof commands);
  if (got < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (got <= 0) return false;
  for (ssize_t i = 0; i < got; ++i) {
    const int signal = commands[i];
    if (signal == SIGKILL) return false;
    if (signal > 0 && signal < NSIG) ::kill(-group, signal);
  }
  return true;
}

// Until the leader ends, serve asks for the end, or serve dies.
void supervise(int signals, Leader& leader) {
  pollfd watched[2] = {{0, POLLIN, 0}, {signals, POLLIN, 0}};
  for (;;) {
    if (::poll(watched, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (watched[1].revents != 0) {
      signalfd_siginfo info{};
      while (::read(signals, &info, sizeof info) == sizeof info)
        if (static_cast<int>(info.ssi_signo) == kParentDeathSignal) return;
      if (reap_ended(leader)) return;
    }
    if (watched[0].revents != 0 && !obey(0, leader.pid)) return;
  }
}

// Every signal blocked for good (none is handled; the child unblocks its
// own); SIGCHLD and the parent-death signal are read from a signalfd.
int take_signals() {
  sigset_t all;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  sigset_t read;
  sigemptyset(&read);
  sigaddset(&read, SIGCHLD);
  sigaddset(&read, kParentDeathSignal);
  return ::signalfd(-1, &read, SFD_NONBLOCK | SFD_CLOEXEC);
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse(argc, argv, options)) {
    std::fprintf(stderr,
                 "usage: inflight-run-shim --parent PID [--cgroup DIR] [--hide FILE]... -- PROGRAM "
                 "[ARG...]\n"
                 "(started by `inflight serve`, one per run attempt)\n");
    return 2;
  }
  const int signals = take_signals();
  // Orphans below the shim become its children, so that it finds and reaps them.
  if (signals < 0 || ::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0 ||
      ::prctl(PR_SET_PDEATHSIG, kParentDeathSignal) != 0)
    return 127;
  Leader leader;
  // Serve may have died before the death signal was asked for: nothing starts then.
  if (::getppid() != options.parent) return 127;
  const auto [pid, error] = start_child(options);
  leader.pid = pid;
  const std::int32_t report[2] = {pid, error};
  write_fully(0, report, sizeof report);
  if (error == 0) supervise(signals, leader);
  end_tree(options, leader);
  if (error != 0) ::_exit(127);
  exit_as(leader);
}
