// /metrics in the Prometheus text exposition format.
#include <boost/beast/http.hpp>
#include <sstream>

#include "inflight/supervisor/http/api_routes.hpp"

namespace inflight {

namespace http = boost::beast::http;

namespace {

void family(std::ostringstream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

}  // namespace

// Records of each run not yet over, and how many it will hold when the
// template says (progress_total).
void ApiRoutes::progress(std::ostringstream& out) {
  std::ostringstream totals;
  family(out, "inflight_run_records", "gauge", "Records in the progress file of each open run.");
  for (const auto& run : supervisor_.runs()) {
    if (is_final(run->status)) continue;
    const std::string label = "{run_id=\"" + run->id + "\"} ";
    out << "inflight_run_records" << label << run->record_count() << "\n";
    if (const auto total = run->records_expected())
      totals << "inflight_run_records_expected" << label << *total << "\n";
  }
  family(out, "inflight_run_records_expected", "gauge",
         "Records each open run will hold when done (its template's progress_total).");
  out << totals.str();
}

HttpResponse ApiRoutes::metrics(unsigned version) {
  std::map<RunStatus, int> by_status;
  for (const auto& run : supervisor_.runs()) ++by_status[run->status];
  std::ostringstream out;
  family(out, "inflight_runs", "gauge", "Runs known to this instance, by status.");
  for (auto status : kAllRunStatuses)
    out << "inflight_runs{status=\"" << to_string(status) << "\"} " << by_status[status] << "\n";
  family(out, "inflight_attempts_total", "counter", "Attempts that ended, by outcome.");
  for (auto outcome : kAllOutcomes) {
    const auto it = supervisor_.attempts_by_outcome().find(outcome);
    const auto count = it == supervisor_.attempts_by_outcome().end() ? 0 : it->second;
    out << "inflight_attempts_total{outcome=\"" << to_string(outcome) << "\"} " << count << "\n";
  }
  family(out, "inflight_checkpoint_failures_total", "counter",
         "Run checkpoints that did not land, by failure kind.");
  for (const auto& [kind, word] : kFailureWords) {
    const auto it = supervisor_.checkpoint_failures().find(kind);
    const auto count = it == supervisor_.checkpoint_failures().end() ? 0 : it->second;
    out << "inflight_checkpoint_failures_total{reason=\"" << word << "\"} " << count << "\n";
  }
  family(out, "inflight_checkpoint_pushes_total", "counter",
         "Pushes of run checkpoints by outcome: fenced only when another instance won the "
         "branch; a refusal by the server's rules is failed.");
  const auto& pushes = supervisor_.checkpoint_pushes();
  out << "inflight_checkpoint_pushes_total{result=\"landed\"} " << pushes.landed << "\n"
      << "inflight_checkpoint_pushes_total{result=\"failed\"} " << pushes.failed << "\n"
      << "inflight_checkpoint_pushes_total{result=\"fenced\"} " << pushes.fenced << "\n";
  family(out, "inflight_results_published_total", "counter",
         "Finished runs whose results this instance published.");
  out << "inflight_results_published_total " << supervisor_.results_published() << "\n";
  progress(out);
  family(out, "inflight_children", "gauge", "Eval children running now.");
  out << "inflight_children " << supervisor_.live_children() << "\n";
  family(out, "inflight_orphans_reaped_total", "counter",
         "Orphaned descendants reaped as child subreaper.");
  out << "inflight_orphans_reaped_total " << reaper_.orphans_reaped() << "\n";
  if (settings_.last_shutdown_seconds) {
    family(out, "inflight_last_shutdown_duration_seconds", "gauge",
           "How long the previous instance's shutdown took, signal to exit.");
    out << "inflight_last_shutdown_duration_seconds " << *settings_.last_shutdown_seconds << "\n";
  }
  HttpResponse response{http::status::ok, version};
  response.set(http::field::content_type, "text/plain; version=0.0.4");
  response.body() = out.str();
  return response;
}

}  // namespace inflight
