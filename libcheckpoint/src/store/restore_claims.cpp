// Restore's claims: a branch copy materialised beside its run dir while
// the claim is pushed, moved in only once the claim landed (restore.cpp).
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/repo_objects.hpp"
#include "inflight/checkpoint/branch_listing.hpp"
#include "inflight/checkpoint/checkpoint_store.hpp"
#include "inflight/checkpoint/run_listing.hpp"
#include "inflight/core/bounded_json.hpp"
#include "inflight/core/run_dir.hpp"
#include "snapshot/run_dir_writers.hpp"
#include "snapshot/tree_validation.hpp"
#include "store/restore_push.hpp"

namespace inflight::checkpoint {

namespace fs = std::filesystem;

namespace {

// A branch copy this disk could not write or move in for want of room (full, over quota,
// read-only) is the disk's failure, not the branch's: the report names it for the caller's disk
// health, which keeps the pod from taking more runs until the disk can hold a checkpoint. Once
// the claim landed, the run is this pod's, and it takes it again at a later look.
void disk_failed(RestoreReport& report, const std::exception& e) {
  const auto* git = dynamic_cast<const GitError*>(&e);
  const auto* system = dynamic_cast<const std::system_error*>(&e);
  const bool disk = (git != nullptr && git->kind() == Failure::cache) ||
                    (system != nullptr && system->code().category() == std::generic_category() &&
                     disk_full_or_read_only(system->code().value()));
  if (disk && !report.disk_failure) report.disk_failure = e.what();
}

// The records the writer counted, or its failure, rethrown.
std::uint64_t written_copy(const std::shared_future<std::uint64_t>& writer, RestoreReport& report) {
  try {
    return writer.get();
  } catch (const std::exception& e) {
    disk_failed(report, e);
    throw;
  }
}

void move_in(const fs::path& staged, const fs::path& dir, RestoreReport& report) {
  try {
    fs::remove_all(dir);
    fs::rename(staged, dir);
  } catch (const std::exception& e) {
    disk_failed(report, e);
    throw;
  }
}

}  // namespace

// The branch copy is materialised beside the run dir (by a writer thread,
// while the claim is pushed) and moved in only once the claim landed, so a
// lost claim or a hostile tree leaves nothing behind. The tree is validated
// before the claim: a claim on a hostile branch would be made again by every
// later look. The local copy is claimed as it is.
void CheckpointStore::claim(const RemoteBranch& branch, const std::string& tip, RunParams params,
                            const RunVerdict& verdict, bool branch_wins,
                            const RestoreRequest& request, RestorePush& push,
                            RestoreReport& report) {
  const auto dir = request.runs_dir / params.run_id;
  auto staging = request.runs_dir / (".restore-" + params.run_id);
  fs::remove_all(staging);  // left by a restore that stopped half-way
  if (branch_wins) {
    ValidatedCommit validated(raw_repo(cache_), tip, config_.restore_limits);
    push.staging.push_back(staging);
    const auto records = verdict.progress_file.empty()
                             ? std::optional<std::uint64_t>(0)
                             : lines_of_blob_at(cache_, tip, verdict.progress_file);
    auto written =
        push.writers.write(std::move(validated), staging, records ? "" : verdict.progress_file);
    push.written.push_back({.branch = branch,
                            .tip = tip,
                            .params = std::move(params),
                            .staged = {std::move(staging), written.share()},
                            .records = records,
                            .total = verdict.progress_total});
    return;
  }
  const auto info =
      claim_info(params, request.pod, records_of(dir, verdict), verdict.progress_total);
  auto commit = *RunSnapshotter(cache_, config_.exclude_globs).snapshot(dir, info, tip);
  add_claim(branch, tip, std::move(params), {}, std::move(commit), request, push, report);
}

// Each branch copy claimed on its own tree; a chunked progress file's
// records are counted by its writer first. One that cannot be claimed, or
// whose writer failed already (the disk), fails alone (~RestorePush removes
// what it left).
void CheckpointStore::claim_written(const RestoreRequest& request, RestorePush& push,
                                    RestoreReport& report) {
  for (auto& written : push.written) {
    try {
      const auto& writer = written.staged.written;
      const bool ask_writer =
          !written.records || writer.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
      const auto counted = ask_writer ? written_copy(writer, report) : 0;
      const auto records = written.records.value_or(counted);
      auto commit = commit_on_own_tree(
          cache_, written.tip, claim_info(written.params, request.pod, records, written.total));
      add_claim(written.branch, written.tip, std::move(written.params), written.staged,
                std::move(commit), request, push, report);
    } catch (const std::exception& e) {
      report.problems.push_back(printable(written.branch.ref) + ": " + e.what());
    }
  }
  push.written.clear();
}

// A claim that does not land means another instance took the run first.
// `staged`, when set, is the branch copy that replaces the run dir once its
// writer is done. A copy the disk could not take after its claim landed is a
// problem of its run alone: the claim is this pod's, so its next look takes
// the run again.
void CheckpointStore::add_claim(const RemoteBranch& branch, const std::string& tip,
                                RunParams params, const std::optional<StagedCopy>& staged,
                                std::string commit, const RestoreRequest& request,
                                RestorePush& push, RestoreReport& report) {
  const auto dir = request.runs_dir / params.run_id;
  const auto name = *parse_branch_ref(branch.ref);
  push.add({.ref = branch.ref, .commit = commit, .from = tip},
           [this, &request, &report, name, dir, staged, commit, branch,
            params = std::move(params)](const RefResult& result) mutable {
             if (result.outcome != RefOutcome::updated) {
               // Unwritten by a local results repo, the run is still on its
               // branch for a later start; judged, it is another's.
               if (judged_against(result.outcome)) {
                 report.lost.push_back(name.run_id);
                 mark_stale(name, request, report);
               }
               return report.problems.push_back(printable(branch.ref) + ": " + result.detail);
             }
             if (staged) {
               written_copy(staged->written, report);
               move_in(staged->dir, dir, report);
             } else if (auto local = read_run_params(dir)) {
               params = std::move(*local);
             }
             report.claimed.push_back({std::move(params), dir, branch.ref, commit});
           });
}

}  // namespace inflight::checkpoint
