#include "inflight/supervisor/runs/run.hpp"

#include "inflight/core/log.hpp"

namespace inflight {

namespace {

template <class Event>
bool refused(const Run& run, Event event, std::string_view state) {
  log::error("bug: a run event its state refuses; the run stays as it is",
             {{"run_id", run.id}, {"state", state}, {"event", to_string(event)}});
  return false;
}

}  // namespace

bool Run::on(RunEvent event) {
  const auto from = lifecycle.state();
  return lifecycle.apply(event) || refused(*this, event, to_string(from));
}

bool Run::on(ReleaseEvent event) {
  const auto from = lifecycle.release_step();
  return lifecycle.apply(event) || refused(*this, event, to_string(from));
}

// The current attempt's record takes its model calls as they stand.
void Run::record_model_calls() {
  if (model_calls && !params.attempts.empty()) params.attempts.back().model = *model_calls;
}

void Run::write_params(checkpoint::Durability durability) {
  record_model_calls();
  try {
    checkpoint::write_run_params(dir, params, durability);
  } catch (const std::exception& e) {
    log::error("run-params.json not updated", {{"run_id", id}, {"error", e.what()}});
  }
}

std::optional<checkpoint::ModelCounts> Run::model_totals() {
  record_model_calls();
  return checkpoint::model_counts(params.attempts);
}

std::uint64_t Run::record_count() {
  if (!child || child->progress_file().empty()) return 0;
  return records.count(dir, child->progress_file());
}

std::optional<std::uint64_t> Run::records_expected() const {
  return child ? child->progress_total(params.request) : std::nullopt;
}

}  // namespace inflight
