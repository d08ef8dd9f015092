// Commit messages of checkpoints and leases (commit_message.hpp,
// lease_record.hpp) on any bytes: every branch tip of the results repo is one.
// Each field is read on its own or unset; nothing crashes, and what a
// checkpoint message says survives being written again.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "inflight/checkpoint/commit_message.hpp"
#include "inflight/checkpoint/lease_record.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace inflight::checkpoint;
  const std::string_view message(reinterpret_cast<const char*>(data), size);
  const auto read = parse_checkpoint_message(message);
  parse_lease_message(message, 1'700'000'000);
  if (!read.run_id || !read.attempt || !read.reason || !read.pod) return 0;
  const CheckpointInfo info{
      *read.run_id, *read.attempt, *read.reason, *read.pod, read.records.value_or(0), read.total};
  const auto again = parse_checkpoint_message(write_checkpoint_message(info));
  if (again.run_id != read.run_id || again.attempt != read.attempt || again.reason != read.reason ||
      again.pod != read.pod || again.records != read.records.value_or(0) ||
      again.total != read.total)
    std::abort();
  return 0;
}
