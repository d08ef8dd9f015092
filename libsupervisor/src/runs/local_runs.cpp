#include "inflight/supervisor/runs/local_runs.hpp"

#include <algorithm>
#include <tuple>

#include "inflight/core/branch_name.hpp"
#include "inflight/core/log.hpp"
#include "inflight/core/run_dir.hpp"
#include "inflight/supervisor/runs/outcome.hpp"
#include "inflight/supervisor/runs/run_supervisor.hpp"

namespace inflight {

namespace fs = std::filesystem;

namespace {

bool is_resumable(const checkpoint::RunParams& params) {
  if (params.final_status || params.handed_over) return false;
  if (params.attempts.empty()) return true;
  const auto& last = params.attempts.back().outcome;
  if (!last) return true;
  const auto outcome = outcome_from_string(*last);
  return outcome && is_resumable(*outcome);
}

// The run dirs under runs_dir whose run-params.json `wanted` accepts.
std::vector<RestoredRun> find_runs(const fs::path& runs_dir,
                                   bool (*wanted)(const checkpoint::RunParams&)) {
  std::vector<RestoredRun> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(runs_dir, ec)) {
    const auto name = entry.path().filename().string();
    if (!entry.is_directory() || entry.is_symlink() || !checkpoint::is_valid_run_id(name)) continue;
    try {
      auto params = checkpoint::read_run_params(entry.path());
      if (!params || params->run_id != name || !wanted(*params)) continue;
      found.push_back({entry.path(), std::move(*params), "", ""});
    } catch (const std::exception& e) {
      log::warn("run dir skipped", {{"dir", entry.path().string()}, {"error", e.what()}});
    }
  }
  return found;
}

bool is_finished(const checkpoint::RunParams& params) {
  return params.final_status && !params.handed_over;
}

}  // namespace

std::vector<RestoredRun> find_resumable_runs(const fs::path& runs_dir) {
  return find_runs(runs_dir, is_resumable);
}

std::vector<RestoredRun> find_finished_runs(const fs::path& runs_dir) {
  return find_runs(runs_dir, is_finished);
}

void prepare_for_resume(RestoredRun& run, const ChildTemplates& templates, const std::string& pod) {
  auto& attempts = run.params.attempts;
  if (!attempts.empty() && !attempts.back().outcome)
    attempts.back().outcome = attempts.back().pod == pod ? "crashed" : "interrupted";
  // The configured template's progress file, never one a branch names.
  const auto progress = templates.judge(run.params).progress_file;
  if (progress.empty()) return;
  if (const auto dropped = checkpoint::repair_torn_line(run.dir, progress))
    log::info("dropped a torn last record", {{"run_id", run.params.run_id}, {"bytes", dropped}});
}

std::size_t adopt_restored(RunSupervisor& supervisor, const ChildTemplates& templates,
                           std::vector<RestoredRun> runs) {
  std::sort(runs.begin(), runs.end(), [](const RestoredRun& a, const RestoredRun& b) {
    return std::tie(a.params.created_at, a.params.run_id) <
           std::tie(b.params.created_at, b.params.run_id);
  });
  std::size_t adopted = 0;
  for (auto& run : runs) {
    try {
      prepare_for_resume(run, templates, supervisor.settings().pod_name);
      supervisor.adopt(std::move(run.params), run.dir, run.branch, run.claim);
      ++adopted;
    } catch (const std::exception& e) {
      log::error("run not restored", {{"dir", run.dir.string()}, {"error", e.what()}});
    }
  }
  return adopted;
}

}  // namespace inflight
