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
  spent_budgets(params);
  const auto written = to_json(params).dump();
  if (to_json(run_params_from_text(written)).dump() != written) std::abort();
  return 0;
}
