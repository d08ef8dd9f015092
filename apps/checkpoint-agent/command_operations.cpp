// The operator's commands of the agent (operation_context.hpp):
// `checkpoints list|show|prune` and `runs list|show|logs|prune`.
#include <fcntl.h>

#include <algorithm>
#include <iterator>
#include <set>

#include "inflight/checkpoint/branch_listing.hpp"
#include "inflight/checkpoint/run_listing.hpp"
#include "inflight/checkpoint/runs_list_output.hpp"
#include "inflight/core/fd.hpp"
#include "inflight/core/log.hpp"
#include "operation_context.hpp"

namespace inflight::agent_ops {

namespace {

agent::BranchInfo branch_info(const ck::BranchSummary& s) {
  return {.run_id = s.name.run_id,
          .origin_pod = s.name.pod,
          .branch = ck::short_branch(s.ref),
          .attempts = s.attempts,
          .time = s.tip.time,
          .records = s.tip.records,
          .size_bytes = s.size_bytes,
          .state = agent::BranchState::resumable,
          .reason = std::nullopt};
}

// What a restore by this instance would do with the branch: resume it, hold
// it (no such template, a request that no longer validates), refuse it, or
// delete it (the run is over).
void judge_branch(agent::BranchInfo& info, const ck::BranchSummary& branch,
                  const ChildTemplates& templates) {
  if (!branch.run_params) {
    info.state = agent::BranchState::refused;
    info.reason = branch.run_params.error().message;
    return;
  }
  try {
    const auto params = ck::run_params_from_json(*branch.run_params);
    if (params.final_status) {
      info.state = agent::BranchState::finished;
    } else if (auto refusal = templates.judge(params).refusal) {
      info.state = agent::BranchState::held;
      info.reason = *refusal;
    }
  } catch (const std::exception& e) {
    info.state = agent::BranchState::refused;
    info.reason = e.what();
  }
}

agent::Shown show_branch(ck::CheckpointStore& store, const ck::RemoteBranch& branch) {
  const auto summary = ck::summarize_branch(store.cache(), store.remote(), branch);
  agent::Shown answer{.branch = branch_info(summary),
                      .tip = summary.tip.oid,
                      .history = {},
                      .run_params = summary.run_params ? *summary.run_params : OrderedJson()};
  for (const auto& commit : ck::history(store.cache(), summary.tip.oid)) {
    const auto c = ck::describe_commit(commit);
    answer.history.push_back({.oid = c.oid,
                              .time = c.time,
                              .reason = c.reason ? std::string(ck::to_string(*c.reason)) : "",
                              .attempt = c.attempt,
                              .pod = c.pod,
                              .records = c.records});
  }
  return answer;
}

// Finished runs among the planned branches are published first; a branch
// whose publication failed is kept, unless the call forces its deletion.
std::vector<std::string> publish_before_prune(ck::CheckpointStore& store, const ck::PrunePlan& plan,
                                              bool force, agent::Pruned& answer) {
  std::vector<std::string> deleting;
  const auto published = store.publish_before_prune(plan.refs, plan.listing);
  for (const auto& ref : plan.refs) {
    const auto it = published.find(ref);
    if (it != published.end() && it->second) {
      answer.published.push_back(ck::short_branch(ref));
    } else if (it != published.end() && !force) {
      answer.failed.push_back(
          {.branch = ck::short_branch(ref),
           .failure = {.kind = it->second.error().kind,
                       .message = "kept, not published (--force deletes it anyway): " +
                                  it->second.error().message,
                       .candidates = {}}});
      continue;
    }
    deleting.push_back(ref);
  }
  return deleting;
}

// A one-shot command cannot watch a lease for its term: a branch whose tip
// was written by a pod that holds a lease (and neither handed the run over
// nor finished it) is live, and kept.
std::vector<std::string> leave_live_branches(ck::CheckpointStore& store, const ck::PrunePlan& plan,
                                             agent::Pruned& answer) {
  std::set<std::string> leased;
  for (const auto& ref : plan.listing)
    if (auto pod = ck::parse_lease_ref(ref.ref)) leased.insert(std::move(*pod));
  std::vector<std::string> refs;
  for (const auto& ref : plan.refs) {
    const auto listed = std::find_if(plan.listing.begin(), plan.listing.end(),
                                     [&](const ck::RemoteBranch& b) { return b.ref == ref; });
    std::optional<ck::CheckpointCommit> tip;
    try {
      if (listed != plan.listing.end())
        tip = ck::describe_commit(
            ck::commit_summary(store.cache(), store.remote().fetch_listed(*listed)));
    } catch (const ck::GitError& e) {
      if (e.network()) throw;
    }
    const bool let_go = tip && (tip->reason == ck::CheckpointReason::shutdown ||
                                tip->reason == ck::CheckpointReason::final);
    if (tip && !let_go && leased.contains(tip->pod)) {
      answer.failed.push_back(
          {.branch = ck::short_branch(ref),
           .failure = {.kind = Failure::other,
                       .message = "live: pod " + tip->pod +
                                  " holds a lease and wrote its last checkpoint (--take-over "
                                  "deletes it anyway, once that pod is gone)",
                       .candidates = {}}});
      continue;
    }
    refs.push_back(ref);
  }
  return refs;
}

}  // namespace

agent::Listed list(Context& c, const agent::List& call) {
  const auto templates = templates_of(call.children);
  const auto listing = ck::list_branches(c.store.cache(), c.store.remote(), call.pod);
  agent::Listed answer{
      .url = c.store.remote().display_url(), .checkpoints = {}, .problems = listing.problems};
  for (const auto& branch : listing.branches) {
    answer.checkpoints.push_back(branch_info(branch));
    judge_branch(answer.checkpoints.back(), branch, templates);
  }
  return answer;
}

// One run's branch, searched on every pod: not_found when no pod holds it,
// ambiguous when several do (the caller then names the branch).
Result<agent::Shown> show(Context& c, const agent::Show& call) {
  const auto found = ck::find_run_branches(c.store.remote(), call.run_id);
  if (found.empty())
    return Error{.kind = Failure::not_found,
                 .message = "no checkpoint branch for '" + call.run_id + "' on " +
                            c.store.remote().display_url(),
                 .candidates = {}};
  if (found.size() == 1) return show_branch(c.store, found.front());
  Error ambiguous{.kind = Failure::ambiguous,
                  .message = "'" + call.run_id + "' has checkpoints from several pods",
                  .candidates = {}};
  for (const auto& branch : found) ambiguous.candidates.push_back(ck::short_branch(branch.ref));
  return ambiguous;
}

// Every deletion in one push; each branch is deleted or fails on its own.
agent::Pruned prune(Context& c, const agent::Prune& call) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  auto plan = ck::plan_prune(
      c.store.cache(), c.store.remote(),
      {.older_than_seconds = call.older_than_seconds, .run_ids = call.run_ids, .all = call.all},
      now);
  agent::Pruned answer{.url = c.store.remote().display_url(),
                       .deleted = {},
                       .failed = {},
                       .missing = plan.missing_run_ids,
                       .problems = plan.problems,
                       .published = {}};
  if (!call.take_over) plan.refs = leave_live_branches(c.store, plan, answer);
  const auto refs =
      call.dry_run ? plan.refs : publish_before_prune(c.store, plan, call.force, answer);
  std::vector<ck::RefUpdate> deletions;
  for (const auto& ref : refs) deletions.push_back({.ref = ref, .commit = "", .from = {}});
  std::vector<ck::RefResult> results(deletions.size());
  if (!call.dry_run && !deletions.empty()) results = c.store.remote().update(deletions);
  for (std::size_t i = 0; i < deletions.size(); ++i) {
    const auto branch = ck::short_branch(deletions[i].ref);
    if (results[i].outcome == ck::RefOutcome::updated)
      answer.deleted.push_back(branch);
    else
      answer.failed.push_back(
          {.branch = branch, .failure = ref_failure(results[i].outcome, results[i].detail)});
  }
  return answer;
}

namespace {

// `bytes` into `path`, a file the caller made: opened without creating it, and without following a
// link planted in its place.
void write_callers_file(const std::string& path, std::string_view bytes) {
  const Fd file(::open(path.c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC));
  if (!file) throw std::runtime_error("open " + path + ": " + std::strerror(errno));
  write_all(file.get(), bytes, path);
}

}  // namespace

agent::RunsListed list_runs(Context& c, const agent::ListRuns& call) {
  const bool finished = call.state != "live" && call.state != "waiting";
  auto listing = ck::list_runs(c.store.cache(), c.store.remote(), finished, call.known_digest);
  auto url = c.store.remote().display_url();
  if (!listing.unchanged)
    write_callers_file(
        call.path, ck::render_runs(listing.runs,
                                   call.json ? ck::ListingFormat::json : ck::ListingFormat::table,
                                   call.state, url));
  return {.url = std::move(url),
          .problems = std::move(listing.problems),
          .digest = std::move(listing.digest),
          .unchanged = listing.unchanged};
}

agent::RunShown show_run(Context& c, const agent::ShowRun& call) {
  const auto run = ck::fetch_run(c.store.cache(), c.store.remote(), call.run_id);
  const auto text =
      ck::read_file_at(c.store.cache(), run.commit, ck::kRunParamsFile, ck::kMaxRunParamsBytes);
  auto params = text ? parse_bounded_json(*text, {.max_bytes = ck::kMaxRunParamsBytes})
                     : Result<OrderedJson>(OrderedJson());
  return {.where = run.where, .run_params = params ? std::move(*params) : OrderedJson()};
}

// Only that run is downloaded.
agent::RunLogWritten run_log(Context& c, const agent::WriteRunLog& call) {
  const auto run = ck::fetch_run(c.store.cache(), c.store.remote(), call.run_id);
  const auto log = ck::read_file_at(c.store.cache(), run.commit, "console.log", c.max_file_bytes);
  if (!log) return {.where = run.where, .found = false};
  write_callers_file(call.path, *log);
  return {.where = run.where, .found = true};
}

agent::RunsPruned prune_runs(Context& c, const agent::PruneRuns& call) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  auto report = ck::prune_runs(c.store.cache(), c.store.remote(),
                               {.older_than_seconds = call.older_than_seconds,
                                .run_ids = call.run_ids,
                                .dry_run = call.dry_run},
                               now);
  return {.url = c.store.remote().display_url(),
          .deleted = std::move(report.deleted),
          .missing = std::move(report.missing),
          .problems = std::move(report.problems),
          .failed = std::move(report.failed)};
}

agent::RunsMigrated migrate_runs(Context& c, const agent::MigrateRuns& call) {
  auto report = ck::migrate_runs(c.store.cache(), c.store.remote(), call.dry_run);
  return {.url = c.store.remote().display_url(),
          .copied = report.copied,
          .folded = report.folded,
          .problems = std::move(report.problems),
          .failed = std::move(report.failed)};
}

agent::RunsCompacted compact_runs(Context& c, const agent::CompactRuns& call) {
  auto report = ck::compact_runs(c.store.cache(), c.store.remote(), call.dry_run);
  return {.url = c.store.remote().display_url(),
          .entries = report.entries,
          .removals = report.removals,
          .commits_before = report.commits_before,
          .commits_after = report.commits_after,
          .problems = std::move(report.problems),
          .failed = std::move(report.failed)};
}

}  // namespace inflight::agent_ops
