#include "inflight/checkpoint/checkpoint_store.hpp"

#include <git2.h>

#include <set>

#include "cache_repo_impl.hpp"
#include "inflight/checkpoint/branch_listing.hpp"
#include "inflight/checkpoint/run_dir.hpp"
#include "oid_text.hpp"

namespace inflight::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kBranchPrefix = "refs/heads/inflight/";

// The tip this cache last pushed to `ref` (RemoteStore::push records it).
std::optional<std::string> last_pushed(CacheRepo& cache, const std::string& ref) {
  const std::string local = "refs/inflight-local/" + ref.substr(std::string("refs/heads/").size());
  git_oid oid;
  if (git_reference_name_to_id(&oid, raw_repo(cache), local.c_str()) != 0) {
    git_error_clear();
    return std::nullopt;
  }
  return oid_hex(oid);
}

std::uint64_t records_of(const RunParams& params, const fs::path& dir) {
  const auto progress = params.child.value("progress_file", std::string());
  return progress.empty() ? 0 : RecordCounter().count(dir / progress);
}

}  // namespace

std::string branch_ref(const std::string& origin_pod, const std::string& run_id) {
  return std::string(kBranchPrefix) + origin_pod + "/" + run_id;
}

CheckpointStore::CheckpointStore(StoreConfig config)
    : config_(std::move(config)), cache_(config_.cache_dir), remote_(cache_, config_.remote) {}

std::optional<std::string> CheckpointStore::save(const fs::path& run_dir,
                                                 const std::string& origin_pod,
                                                 const CheckpointInfo& info) {
  const auto ref = branch_ref(origin_pod, info.run_id);
  auto [it, inserted] = snapshotters_.try_emplace(run_dir.string(), cache_, config_.exclude_globs);
  const auto commit = it->second.snapshot(run_dir, info, last_pushed(cache_, ref));
  if (commit) remote_.push(ref, *commit);
  return commit;
}

void CheckpointStore::release(const std::string& origin_pod, const std::string& run_id) {
  remote_.remove(branch_ref(origin_pod, run_id));
}

RestoreReport CheckpointStore::restore(const fs::path& runs_dir, const std::string& pod,
                                       const std::map<std::string, std::size_t>& local_attempts,
                                       const std::optional<std::string>& only) {
  RestoreReport report;
  std::set<std::string> on_remote;
  for (const auto& branch : remote_.list(std::string(kBranchPrefix))) {
    const auto names = parse_branch_ref(branch.ref);
    if (only && (!names || names->run_id != *only)) continue;
    if (names) on_remote.insert(names->run_id);
    try {
      if (auto run = claim(branch, runs_dir, pod, local_attempts))
        report.claimed.push_back(std::move(*run));
    } catch (const GitError& e) {
      if (e.kind() == GitErrorKind::unreachable || e.kind() == GitErrorKind::auth) throw;
      if (e.kind() == GitErrorKind::rejected && names) report.lost.push_back(names->run_id);
      report.problems.push_back(branch.ref + ": " + e.what());
    } catch (const std::exception& e) {
      report.problems.push_back(branch.ref + ": " + e.what());
    }
  }
  for (const auto& [run_id, attempts] : local_attempts) {
    if (!only && !on_remote.count(run_id)) push_local_run(runs_dir / run_id, pod, report);
  }
  return report;
}

// A run that only this disk holds (its shutdown push failed, or it never had
// one) gets its branch now, which also claims it.
void CheckpointStore::push_local_run(const fs::path& dir, const std::string& pod,
                                     RestoreReport& report) {
  try {
    auto params = read_run_params(dir);
    if (!params) return;
    const CheckpointInfo info{params->run_id, static_cast<int>(params->attempts.size()), "claim",
                              pod, records_of(*params, dir)};
    const auto commit = save(dir, params->origin_pod, info);
    report.claimed.push_back(
        {*params, dir, branch_ref(params->origin_pod, params->run_id), commit.value_or("")});
  } catch (const GitError& e) {
    if (e.kind() == GitErrorKind::unreachable || e.kind() == GitErrorKind::auth) throw;
    report.problems.push_back(dir.string() + ": " + e.what());
  }
}

// Pushing on top of another pod's fresh claim would take the run from an
// instance that is running it now; both would run it until the next push.
void CheckpointStore::refuse_live_claim(const std::string& tip, const std::string& pod) {
  const auto last = history(cache_, tip).front();
  const auto subject = last.message.substr(0, last.message.find('\n'));
  const auto pod_at = last.message.find("Inflight-Pod: ");
  if (!subject.ends_with("(claim)") || pod_at == std::string::npos) return;
  const auto claimer =
      last.message.substr(pod_at + 14, last.message.find('\n', pod_at) - pod_at - 14);
  const auto age = std::chrono::system_clock::now() -
                   std::chrono::system_clock::from_time_t(static_cast<std::time_t>(last.time));
  if (claimer != pod && age < config_.claim_lease)
    throw GitError(GitErrorKind::rejected, "claimed by " + claimer + " moments ago");
}

std::optional<ClaimedRun> CheckpointStore::claim(
    const RemoteBranch& branch, const fs::path& runs_dir, const std::string& pod,
    const std::map<std::string, std::size_t>& local_attempts) {
  const auto names = parse_branch_ref(branch.ref);
  if (!names) throw std::runtime_error("not an inflight/<pod>/<run-id> branch");
  const auto& run_id = names->run_id;
  const auto tip = remote_.fetch(branch.ref);
  refuse_live_claim(tip, pod);
  const auto text = read_file_at(cache_, tip, kRunParamsFile);
  if (!text) throw std::runtime_error("the checkpoint has no run-params.json");
  auto params = run_params_from_json(OrderedJson::parse(*text));
  if (params.run_id != run_id) throw std::runtime_error("run-params.json names another run");
  if (params.final_status) return std::nullopt;  // kept for inspection only

  const auto local = local_attempts.find(run_id);
  const bool branch_wins = local == local_attempts.end() || params.attempts.size() > local->second;
  const auto dir = runs_dir / run_id;
  // The branch copy is materialised beside the run dir and moved in only once
  // the claim landed, so a lost claim or a hostile tree leaves nothing behind.
  const auto staging = runs_dir / (".restore-" + run_id);
  fs::remove_all(staging);
  const auto claim_from = branch_wins ? staging : dir;
  if (branch_wins) materialize(cache_, tip, staging, config_.restore_max_bytes);
  std::string claim_commit;
  try {
    const CheckpointInfo info{run_id, static_cast<int>(params.attempts.size()), "claim", pod,
                              records_of(params, claim_from)};
    claim_commit = *RunSnapshotter(cache_, config_.exclude_globs).snapshot(claim_from, info, tip);
    remote_.push(branch.ref, claim_commit);
  } catch (...) {
    fs::remove_all(staging);
    throw;
  }
  if (branch_wins) {
    fs::remove_all(dir);
    fs::rename(staging, dir);
  } else if (auto local_params = read_run_params(dir)) {
    params = std::move(*local_params);
  }
  return ClaimedRun{std::move(params), dir, branch.ref, claim_commit};
}

}  // namespace inflight::checkpoint
