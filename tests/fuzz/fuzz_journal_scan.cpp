// A run's whole model-call journal (model_journal.hpp) on any bytes: the
// segments a child or a branch left in .inflight/model-calls/, scanned as a
// restore scans them before a replay. The input is cut into segments at each
// "\n--\n"; its first byte picks small limits, so that the limits' edges are
// reached. Either the scan names a problem and offers nothing to replay, or
// every answer it offers reads back with the digest it is filed under, and
// what it counts adds up. A scan that reads 1 to 64 bytes at a time (the
// input's last byte picks), so that a header or a line spans its reads, must
// find the same.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>

#include "inflight/supervisor/models/model_journal.hpp"

namespace {

namespace fs = std::filesystem;
using namespace inflight::models;

// A run dir of this process's own, removed at its exit.
struct ScratchRunDir {
  fs::path path = fs::temp_directory_path() /
                  ("inflight-fuzz-journal-scan-" + std::to_string(static_cast<long>(::getpid())));
  ~ScratchRunDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

const fs::path& run_dir() {
  static const ScratchRunDir dir;
  return dir.path;
}

void write_segments(std::string_view input) {
  const auto folder = run_dir() / ".inflight" / "model-calls";
  std::error_code ignored;
  fs::remove_all(folder, ignored);
  fs::create_directories(folder);
  std::size_t number = 1;
  while (true) {
    const auto cut = input.find("\n--\n");
    std::ofstream(folder / journal_segment_name(number++), std::ios::binary)
        << input.substr(0, cut);
    if (cut == std::string_view::npos) break;
    input.remove_prefix(cut + 4);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const JournalLimits limits{.max_bytes = 64ull << (data[0] & 0x0f),
                             .segment_bytes = 8ull << 20,
                             .max_segments = std::size_t{1} + (data[0] >> 4)};
  write_segments(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  const auto scan = scan_journal(run_dir(), limits);
  auto small_reads = limits;
  small_reads.scan_block = 1 + data[size - 1] % 64;
  const auto again = scan_journal(run_dir(), small_reads);
  if (again.problem != scan.problem || again.by_digest != scan.by_digest ||
      again.bytes != scan.bytes || again.records != scan.records ||
      again.segments != scan.segments || again.torn_tail_dropped != scan.torn_tail_dropped ||
      again.last_segment_end != scan.last_segment_end)
    std::abort();
  if (scan.problem) {
    if (scan.problem->empty() || !scan.by_digest.empty()) std::abort();
    return 0;
  }
  if (scan.bytes > limits.max_bytes || scan.segments.size() > limits.max_segments) std::abort();
  std::size_t entries = 0;
  for (const auto& [digest, answers] : scan.by_digest)
    for (const auto& entry : answers) {
      ++entries;
      const auto record = read_journal_entry(scan, entry);
      if (!record || record->digest != digest) std::abort();
    }
  if (entries != scan.records) std::abort();
  return 0;
}
