#include "inflight/supervisor/runs/run.hpp"

#include <array>

namespace inflight {

std::string_view to_string(RunStatus status) {
  static constexpr std::array<std::string_view, 8> kNames{"queued",    "starting",   "running",
                                                          "stopping",  "succeeded",  "failed",
                                                          "cancelled", "interrupted"};
  return kNames[static_cast<std::size_t>(status)];
}

bool is_final(RunStatus status) {
  return status == RunStatus::succeeded || status == RunStatus::failed ||
         status == RunStatus::cancelled || status == RunStatus::interrupted;
}

std::uint64_t Run::record_count() {
  if (!child || child->progress_file().empty()) return 0;
  return records.count(dir, child->progress_file());
}

}  // namespace inflight
