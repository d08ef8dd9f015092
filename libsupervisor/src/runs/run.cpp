#include "inflight/supervisor/runs/run.hpp"

#include "inflight/core/word_table.hpp"

namespace inflight {

namespace {

constexpr WordTable<RunStatus, 8> kRunStatusWords{{{RunStatus::queued, "queued"},
                                                   {RunStatus::starting, "starting"},
                                                   {RunStatus::running, "running"},
                                                   {RunStatus::stopping, "stopping"},
                                                   {RunStatus::succeeded, "succeeded"},
                                                   {RunStatus::failed, "failed"},
                                                   {RunStatus::cancelled, "cancelled"},
                                                   {RunStatus::interrupted, "interrupted"}}};

}  // namespace

std::string_view to_string(RunStatus status) {
  return word_of(kRunStatusWords, status);
}

std::optional<RunStatus> run_status_named(std::string_view word) {
  return value_of(kRunStatusWords, word);
}

bool is_final(RunStatus status) {
  return status == RunStatus::succeeded || status == RunStatus::failed ||
         status == RunStatus::cancelled || status == RunStatus::interrupted;
}

std::uint64_t Run::record_count() {
  if (!child || child->progress_file().empty()) return 0;
  return records.count(dir, child->progress_file());
}

std::optional<std::uint64_t> Run::records_expected() const {
  return child ? child->progress_total(params.request) : std::nullopt;
}

}  // namespace inflight
