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

void sample(std::ostringstream& out, const char* name, const char* type, const char* help,
            double value) {
  family(out, name, type, help);
  out << name << " " << value << "\n";
}

double unix_seconds(std::optional<SystemClock::time_point> at) {
  if (!at) return 0;
  return std::chrono::duration<double>(at->time_since_epoch()).count();
}

}  // namespace

// Whether this pod's work is safe in the results repo (docs/metrics.md "Metrics"): an SRE alerts on
// unsaved work growing and on the lease lapsing.
void ApiRoutes::checkpoint_health(std::ostringstream& out) {
  double unsaved = 0;
  std::uint64_t records_unsaved = 0;
  const auto now = SteadyClock::now();
  for (const auto& run : supervisor_.runs()) {
    if (run->status() != RunStatus::running && run->status() != RunStatus::stopping) continue;
    if (const auto since = run->checkpoint.unsaved_since)
      unsaved = std::max(unsaved, std::chrono::duration<double>(now - *since).count());
    const auto records = run->record_count();
    records_unsaved += records - std::min(records, run->checkpoint.records_saved);
  }
  sample(out, "inflight_checkpoint_last_landed_timestamp_seconds", "gauge",
         "When a checkpoint of this pod last landed (unix time; 0: none yet).",
         unix_seconds(supervisor_.checkpoints().last_landed()));
  sample(out, "inflight_checkpoint_unsaved_seconds", "gauge",
         "Age of the oldest change in a running run's dir not yet in the results repo.", unsaved);
  sample(out, "inflight_records_unsaved", "gauge",
         "Records running runs wrote since their last landed checkpoint: the work at risk.",
         static_cast<double>(records_unsaved));
  sample(out, "inflight_checkpoint_interval_seconds", "gauge",
         "The periodic checkpoint interval (0: periodic checkpoints off).",
         std::chrono::duration<double>(settings_.checkpoint_interval).count());
  sample(out, "inflight_lease_expiry_timestamp_seconds", "gauge",
         "When this pod's lease ends, by its own clock (unix time; 0: it holds none).",
         unix_seconds(settings_.lease ? settings_.lease->expiry() : std::nullopt));
}

// What the children's model calls cost and how many the journal answered
// (docs/models.md "Accounting"); an SRE alerts on calls failing.
void ApiRoutes::model_calls(std::ostringstream& out) {
  if (!settings_.models) return;
  const auto& metrics = settings_.models->metrics();
  family(out, "inflight_model_calls_total", "counter",
         "Model calls that ended, by model, source (upstream, journal) and outcome (ok, error, "
         "cut).");
  for (const auto& [key, count] : metrics.calls) {
    const auto& [model, source, outcome] = key;
    out << "inflight_model_calls_total{model=\"" << model << "\",source=\"" << source
        << "\",outcome=\"" << outcome << "\"} " << count << "\n";
  }
  family(out, "inflight_model_tokens_total", "counter",
         "Tokens of the model calls' answers as the providers' usage reported them, by model, "
         "kind (input, output) and source (upstream: paid; journal: saved).");
  for (const auto& [key, count] : metrics.tokens) {
    const auto& [model, kind, source] = key;
    out << "inflight_model_tokens_total{model=\"" << model << "\",kind=\"" << kind << "\",source=\""
        << source << "\"} " << count << "\n";
  }
  sample(out, "inflight_model_calls_in_flight", "gauge", "Model calls under way.",
         static_cast<double>(settings_.models->in_flight()));
}

// Restores, lost claims, fencing and spent budgets, and each open run's
// two budgets (docs/serve.md "The two budgets").
void ApiRoutes::run_events(std::ostringstream& out) {
  const auto& events = supervisor_.run_events();
  sample(out, "inflight_runs_restored_total", "counter",
         "Runs this instance took from the results repo or its disk to resume.",
         static_cast<double>(events.restored));
  sample(out, "inflight_claims_lost_total", "counter",
         "Claims of runs that another instance won first.",
         static_cast<double>(events.claims_lost));
  sample(out, "inflight_restore_packs_indexed_by_libgit2_total", "counter",
         "Packs that restores downloaded and inflight's own indexer left to libgit2's (slower; "
         "the log says why).",
         static_cast<double>(events.packs_indexed_by_libgit2));
  sample(out, "inflight_runs_fenced_total", "counter",
         "Runs another instance took from this one (a push lost to its write).",
         static_cast<double>(supervisor_.checkpoints().runs_fenced()));
  family(out, "inflight_runs_out_of_budget_total", "counter",
         "Runs failed for spending a budget: attempts (their own failures) or interruptions.");
  for (const auto budget : {Budget::attempts, Budget::interruptions}) {
    const auto it = events.out_of_budget.find(budget);
    out << "inflight_runs_out_of_budget_total{budget=\"" << to_string(budget) << "\"} "
        << (it == events.out_of_budget.end() ? 0 : it->second) << "\n";
  }
  std::ostringstream interruptions;
  family(out, "inflight_run_failures", "gauge",
         "Attempts of each open run that ended by its own doing (against --max-attempts).");
  for (const auto& run : supervisor_.runs()) {
    if (is_final(run->status())) continue;
    const auto spent = checkpoint::spent_budgets(run->params);
    const std::string label = "{run_id=\"" + run->id + "\"} ";
    out << "inflight_run_failures" << label << spent.failures << "\n";
    interruptions << "inflight_run_interruptions" << label << spent.interruptions << "\n";
  }
  family(out, "inflight_run_interruptions", "gauge",
         "Attempts of each open run that a shutdown or another instance ended (against "
         "--max-interruptions).");
  out << interruptions.str();
}

// Records of each run not yet over, and how many it will hold when the
// template says (progress_total).
void ApiRoutes::progress(std::ostringstream& out) {
  std::ostringstream totals;
  family(out, "inflight_run_records", "gauge", "Records in the progress file of each open run.");
  for (const auto& run : supervisor_.runs()) {
    if (is_final(run->status())) continue;
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
  for (const auto& run : supervisor_.runs()) ++by_status[run->status()];
  std::ostringstream out;
  out.precision(15);  // unix times to the millisecond, counts as integers
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
    const auto it = supervisor_.checkpoints().failures().find(kind);
    const auto count = it == supervisor_.checkpoints().failures().end() ? 0 : it->second;
    out << "inflight_checkpoint_failures_total{reason=\"" << word << "\"} " << count << "\n";
  }
  family(out, "inflight_checkpoint_pushes_total", "counter",
         "Pushes of run checkpoints by outcome: fenced only when another instance won the "
         "branch; a refusal by the server's rules is failed.");
  const auto& pushes = supervisor_.checkpoints().pushes();
  out << "inflight_checkpoint_pushes_total{result=\"landed\"} " << pushes.landed << "\n"
      << "inflight_checkpoint_pushes_total{result=\"failed\"} " << pushes.failed << "\n"
      << "inflight_checkpoint_pushes_total{result=\"fenced\"} " << pushes.fenced << "\n";
  family(out, "inflight_results_published_total", "counter",
         "Finished runs whose results this instance published.");
  out << "inflight_results_published_total " << supervisor_.checkpoints().results_published()
      << "\n";
  progress(out);
  checkpoint_health(out);
  model_calls(out);
  run_events(out);
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
