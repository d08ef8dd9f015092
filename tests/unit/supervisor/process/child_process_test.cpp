// A child starts in a state of its own (group, mask, dispositions), and a
// signal sent to the supervisor's group while children are being forked is
// seen once: a child between fork and exec must not run the supervisor's
// handlers, which write into the supervisor's signal pipe.
#include "inflight/supervisor/process/child_process.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "inflight/core/fd.hpp"

namespace inflight {
namespace {

int wait_for_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// /proc/<child>/status by field, as the child itself read it.
std::map<std::string, std::string> child_signal_state(boost::asio::io_context& io) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  Fd read_end(fds[0]), write_end(fds[1]);
  const Fd null(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  const pid_t pid = spawn_child(io, {.argv = {"/bin/cat", "/proc/self/status"},
                                     .cwd = "/",
                                     .env = {},
                                     .stdin_fd = -1,
                                     .stdout_fd = write_end.get(),
                                     .stderr_fd = null.get()});
  write_end = Fd();
  EXPECT_EQ(::getpgid(pid), pid);
  std::string text;
  char buffer[512];
  for (ssize_t n; (n = ::read(read_end.get(), buffer, sizeof buffer)) > 0;) text.append(buffer, n);
  wait_for_exit(pid);
  std::map<std::string, std::string> fields;
  std::istringstream lines(text);
  for (std::string name, value; std::getline(lines, name, ':') && lines >> value;) {
    fields[name] = value;
    lines.ignore(text.size(), '\n');
  }
  return fields;
}

TEST(ChildProcess, StartsInItsOwnGroupWithNoSignalBlockedIgnoredOrCaught) {
  boost::asio::io_context io;
  boost::asio::signal_set handled(io, SIGTERM, SIGINT);  // as serve has
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t blocked, previous;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGUSR1);
  ::pthread_sigmask(SIG_BLOCK, &blocked, &previous);
  std::map<std::string, std::string> state;
  try {
    state = child_signal_state(io);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
  const std::string none = "0000000000000000";
  EXPECT_EQ(state["SigBlk"], none);
  EXPECT_EQ(state["SigIgn"], none);
  EXPECT_EQ(state["SigCgt"], none);
}

// In a process group of its own: rounds of spawns, one SIGUSR1 to the group
// from another thread in the middle of each; exits 0 when every signal was
// seen exactly once.
[[noreturn]] void spawn_bursts_with_one_signal_each() {
  ::setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  boost::asio::io_context io;
  boost::asio::signal_set signals(io, SIGUSR1);
  int seen = 0;
  std::function<void()> await = [&] {
    signals.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      ++seen;
      await();
    });
  };
  await();
  const Fd null(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  constexpr int kRounds = 30;
  for (int round = 1; round <= kRounds; ++round) {
    std::atomic<int> spawned{0};
    std::atomic<bool> sent{false};
    std::thread sender([&] {
      while (spawned.load() < round % 7 + 3) std::this_thread::yield();
      ::kill(0, SIGUSR1);
      sent = true;
    });
    std::vector<pid_t> children;
    while (!sent.load()) {
      children.push_back(spawn_child(io, {.argv = {"/bin/true"},
                                          .cwd = "/",
                                          .env = {},
                                          .stdin_fd = -1,
                                          .stdout_fd = null.get(),
                                          .stderr_fd = null.get()}));
      ++spawned;
    }
    sender.join();
    // Once every child is gone, whatever any of them wrote into the signal
    // pipe is there to be read.
    for (const pid_t child : children) wait_for_exit(child);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (seen < round && std::chrono::steady_clock::now() < deadline) io.run_one_until(deadline);
    io.poll();
    if (seen != round) {
      std::fprintf(stderr, "round %d: the signal was seen %d times\n", round, seen - round + 1);
      std::_Exit(1);
    }
  }
  std::_Exit(0);
}

// The exec fails in the child; its errno comes back as a std::system_error,
// whose code the run's status shows.
TEST(ChildProcess, AProgramThatCannotBeExecutedThrowsItsErrno) {
  boost::asio::io_context io;
  const Fd null(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  for (const auto& [program, expected] :
       {std::pair{"/nonexistent/eval-tool", ENOENT}, std::pair{"/dev/null", EACCES},
        std::pair{"eval-tool-not-on-path", ENOENT}}) {
    try {
      spawn_child(io, {.argv = {program},
                       .cwd = "/",
                       .env = {},
                       .stdin_fd = -1,
                       .stdout_fd = null.get(),
                       .stderr_fd = null.get()});
      FAIL() << program << " started";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code().value(), expected) << program << ": " << e.what();
    }
  }
}

TEST(ChildProcess, ASignalToTheGroupDuringABurstOfSpawnsIsSeenOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(spawn_bursts_with_one_signal_each(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace inflight
