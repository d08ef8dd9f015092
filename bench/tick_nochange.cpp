// What a periodic checkpoint tick costs when nothing changed in the run dir.
//
// serve's tick computes inflight::checkpoint::stat_signature(run_dir) and
// spawns no checkpoint agent when it equals the last one. This times that call
// on a 1,005-file run dir (the layout of bench/checkpoint_push.py: cases/ with
// 1,000 files of 6,000 bytes, index.jsonl of 300 KB and 4 small files; or the
// dir given as argv[1]) against two baselines measured in the same run:
//   stat  a plain loop that lstat()s every regular file, its paths collected
//         once up front (only the lstat loop is timed): the least any
//         metadata check of every file can cost;
//   walk  std::filesystem::recursive_directory_iterator + lstat of each entry:
//         listing the dir and stat-ing every file, no hashing.
// After a warm-up, the three are timed in interleaved rounds (default 200;
// argv[2]) with std::chrono::steady_clock; medians are reported.
// Goal: tick/stat <= 3. No pass/fail assertion.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "inflight/core/run_dir.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr double kGoal = 3.0;

void write_text(const fs::path& path, std::mt19937_64& rng, std::size_t size) {
  static constexpr char kLetters[] = "abcdefghijklmnopqrstuvwxyz      \n";
  std::string text(size, ' ');
  for (auto& c : text) c = kLetters[rng() % (sizeof kLetters - 1)];
  std::ofstream(path, std::ios::binary) << text;
}

// The 1,005-file run dir of bench/checkpoint_push.py (same names and sizes;
// stat_signature reads no content, so the bytes need not match).
void make_run_dir(const fs::path& dir) {
  std::mt19937_64 rng(42);
  fs::create_directories(dir / "cases");
  for (int i = 0; i < 1000; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "case-%04d.txt", i);
    write_text(dir / "cases" / name, rng, 6000);
  }
  write_text(dir / "index.jsonl", rng, 300000);
  write_text(dir / "run-params.json", rng, 500);
  write_text(dir / "console.log", rng, 2000);
  write_text(dir / "summary.json", rng, 1000);
  write_text(dir / "metrics.csv", rng, 7000);
}

std::vector<std::string> regular_files(const fs::path& dir) {
  std::vector<std::string> paths;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) paths.push_back(entry.path().string());
  }
  return paths;
}

// Sums a field of every stat so the compiler cannot drop the calls.
std::uint64_t lstat_all(const std::vector<std::string>& paths) {
  std::uint64_t sum = 0;
  for (const auto& path : paths) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) sum += static_cast<std::uint64_t>(st.st_mtim.tv_nsec);
  }
  return sum;
}

std::uint64_t walk_and_lstat(const fs::path& dir) {
  std::uint64_t sum = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode))
      sum += static_cast<std::uint64_t>(st.st_mtim.tv_nsec);
  }
  return sum;
}

template <typename F>
double time_us(F&& f, std::uint64_t& sink) {
  const auto t0 = Clock::now();
  sink += f();
  const auto t1 = Clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count();
}

struct Summary {
  double median, min, p90;
};

Summary summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  const double median = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {median, v.front(), v[std::min(n - 1, n * 9 / 10)]};
}

void print(const char* label, const Summary& s) {
  std::printf("  %-50s median %8.1f us   (min %8.1f, p90 %8.1f)\n", label, s.median, s.min, s.p90);
}

}  // namespace

int main(int argc, char** argv) {
  fs::path dir;
  fs::path owned;
  if (argc > 1) {
    dir = argv[1];
  } else {
    owned = fs::temp_directory_path() /
            ("inflight-bench-tick-" + std::to_string(static_cast<long>(::getpid())));
    fs::remove_all(owned);
    make_run_dir(owned / "run");
    dir = owned / "run";
  }
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 200;

  const auto paths = regular_files(dir);
  std::uint64_t sink = 0;
  for (int i = 0; i < 10; ++i) {  // warm-up: dentries, inodes and code paged in
    sink += inflight::checkpoint::stat_signature(dir) + lstat_all(paths) + walk_and_lstat(dir);
  }

  std::vector<double> tick, stat, walk;
  const auto signature = inflight::checkpoint::stat_signature(dir);
  bool stable = true;
  for (int i = 0; i < rounds; ++i) {
    std::uint64_t last = 0;
    tick.push_back(time_us(
        [&] {
          last = inflight::checkpoint::stat_signature(dir);
          return last;
        },
        sink));
    stable = stable && last == signature;
    stat.push_back(time_us([&] { return lstat_all(paths); }, sink));
    walk.push_back(time_us([&] { return walk_and_lstat(dir); }, sink));
  }

  const auto t = summarize(tick), s = summarize(stat), w = summarize(walk);
  std::printf("tick_nochange: %zu files in %s, %d interleaved rounds after 10 warm-ups\n",
              paths.size(), dir.c_str(), rounds);
  print("tick: checkpoint::stat_signature(run_dir)", t);
  print("baseline stat: lstat loop, paths collected once", s);
  print("baseline walk: recursive_directory_iterator+lstat", w);
  std::printf("  signature stable across rounds: %s (sink %llu)\n", stable ? "yes" : "NO",
              static_cast<unsigned long long>(sink % 10));
  std::printf("  goal: tick/stat <= %.0f\n", kGoal);
  std::printf("RATIO tick/stat (medians) = %.2f\n", t.median / s.median);
  std::printf("RATIO tick/walk (medians) = %.2f\n", t.median / w.median);
  if (!owned.empty()) fs::remove_all(owned);
  return stable ? 0 : 1;
}
