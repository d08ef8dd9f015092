// inflight-demo-eval: the reference eval child (docs/serve.md "The config file and the child
// templates"). Runs tests t001…tNNN, appending one JSON line per finished test to DIR/index.jsonl
// with a single write() each, so a reader never sees half a record. SIGTERM stops it at once: the
// test in progress is dropped and it exits 143.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>
#include <string>

namespace {

std::string test_id(int n, int total) {
  const int width = std::max<int>(3, std::to_string(total).size());
  std::string digits = std::to_string(n);
  return "t" + std::string(width - digits.size(), '0') + digits;
}

// Tests already recorded; only complete lines count.
std::set<std::string> finished_tests(const std::filesystem::path& index) {
  std::set<std::string> done;
  std::ifstream in(index);
  std::string line;
  while (std::getline(in, line)) {
    const auto key = line.find("\"test_id\":\"");
    if (in.eof() || key == std::string::npos) continue;
    const auto start = key + 11;
    done.insert(line.substr(start, line.find('"', start) - start));
  }
  return done;
}

std::string utc_now() {
  char buf[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Waits out one test's duration unless a stop signal arrives first; returns
// the signal number, or 0 when the test ran to completion.
int run_test(const sigset_t& stop_signals, int test_ms) {
  timespec wait{test_ms / 1000, static_cast<long>(test_ms % 1000) * 1000000L};
  for (;;) {
    const int sig = sigtimedwait(&stop_signals, nullptr, &wait);
    if (sig > 0) return sig;
    if (errno == EAGAIN) return 0;
    if (errno != EINTR) {
      std::perror("sigtimedwait");
      std::exit(1);
    }
  }
}

bool append_record(int fd, const std::string& id, int test_ms) {
  const double score = static_cast<double>(std::hash<std::string>{}(id) % 1001) / 1000.0;
  char line[256];
  const int len = std::snprintf(line, sizeof line,
                                "{\"test_id\":\"%s\",\"score\":%.3f,\"duration_ms\":%d,"
                                "\"timestamp\":\"%s\"}\n",
                                id.c_str(), score, test_ms, utc_now().c_str());
  return ::write(fd, line, len) == len;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"inflight-demo-eval: the reference eval child of inflight"};
  std::filesystem::path output;
  int tests = 20;
  int test_ms = 500;
  bool resume = false;
  app.add_option("--output", output, "run directory")->required();
  app.add_option("--tests", tests, "number of tests")->check(CLI::Range(0, 99999));
  app.add_option("--test-ms", test_ms, "duration of one test in ms")
      ->check(CLI::Range(0, 86400000));
  app.add_flag("--resume", resume, "skip tests already in index.jsonl");
  CLI11_PARSE(app, argc, argv);

  // Blocked so that they are taken synchronously by sigtimedwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigprocmask(SIG_BLOCK, &stop_signals, nullptr);

  std::filesystem::create_directories(output);
  const auto index = output / "index.jsonl";
  const auto done = resume ? finished_tests(index) : std::set<std::string>{};
  const int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (resume ? 0 : O_TRUNC);
  const int fd = ::open(index.c_str(), flags, 0644);
  if (fd < 0) {
    std::cerr << "inflight-demo-eval: cannot open " << index << ": " << std::strerror(errno)
              << "\n";
    return 1;
  }
  std::cout << "inflight-demo-eval: " << tests << " tests, " << done.size() << " already done"
            << std::endl;
  for (int n = 1; n <= tests; ++n) {
    const auto id = test_id(n, tests);
    if (done.count(id)) continue;
    if (const int sig = run_test(stop_signals, test_ms)) {
      std::cout << "inflight-demo-eval: stopped by signal " << sig << " before " << id << std::endl;
      return 128 + sig;
    }
    if (!append_record(fd, id, test_ms)) {
      std::cerr << "inflight-demo-eval: write failed: " << std::strerror(errno) << "\n";
      return 1;
    }
  }
  std::cout << "inflight-demo-eval: all " << tests << " tests done" << std::endl;
  return 0;
}
