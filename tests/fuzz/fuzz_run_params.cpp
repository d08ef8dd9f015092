// run-params.json (run_params.hpp) on any bytes: a run dir's file, read from
// a branch or a disk that anyone with push or volume access can write.
// Refused with a std::runtime_error that names the field, or read; what is
// read writes back to JSON that reads the same run.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "inflight/core/run_params.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace inflight::checkpoint;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  RunParams params;
  try {
    params = run_params_from_text(text);
  } catch (const std::runtime_error& refused) {
    if (std::string_view(refused.what()).empty()) std::abort();
    return 0;
  }
  const auto spent = spent_budgets(params);
  if (static_cast<std::size_t>(spent.failures + spent.interruptions) > params.attempts.size())
    std::abort();
  // Written again, a number can grow (1e14 is dumped as 100000000000000.0) past the limit of
  // what is read: only what fits is read back.
  const auto written = to_json(params).dump();
  if (written.size() > kMaxRunParamsBytes) return 0;
  if (to_json(run_params_from_text(written)).dump() != written) std::abort();
  return 0;
}
