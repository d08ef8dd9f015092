// The agent's side of AgentCheckpoints: one store operation per process.
#include "operations.hpp"

#include <chrono>
#include <iostream>
#include <iterator>
#include <map>
#include <set>

#include "inflight/bounded_json.hpp"
#include "inflight/checkpoint/branch_listing.hpp"
#include "inflight/checkpoint/checkpoint_store.hpp"
#include "inflight/supervisor/agent_client.hpp"
#include "inflight/supervisor/child_templates.hpp"

namespace inflight {

namespace ck = checkpoint;

namespace {

ck::StoreConfig store_config(const OrderedJson& s) {
  ck::StoreConfig config;
  config.cache_dir = s.at("cache_dir").get<std::string>();
  config.remote = {s.at("url").get<std::string>(), s.value("username", ""),
                   s.value("token", ""),           s.value("ssh_key", ""),
                   s.value("known_hosts", ""),     s.value("ca_file", "")};
  config.exclude_globs = s.value("excludes", std::vector<std::string>{});
  config.restore_limits = {.max_bytes = s.at("restore_max_bytes").get<std::uint64_t>(),
                           .max_files = s.at("restore_max_files").get<std::uint64_t>()};
  config.claim_lease = std::chrono::seconds(s.value("claim_lease_seconds", 120));
  return config;
}

const char* kind_name(ck::GitErrorKind kind) {
  switch (kind) {
    case ck::GitErrorKind::unreachable:
      return "unreachable";
    case ck::GitErrorKind::auth:
      return "auth";
    case ck::GitErrorKind::rejected:
      return "rejected";
    case ck::GitErrorKind::not_found:
      return "not_found";
    case ck::GitErrorKind::hostile_tree:
      return "hostile_tree";
    case ck::GitErrorKind::cache:
      return "cache";
    case ck::GitErrorKind::other:
      break;
  }
  return "other";
}

ck::CheckpointInfo checkpoint_info(const OrderedJson& r) {
  return {r.at("run_id").get<std::string>(), r.at("attempt").get<int>(),
          r.at("reason").get<std::string>(), r.at("pod").get<std::string>(),
          r.at("records").get<std::uint64_t>()};
}

OrderedJson save(ck::CheckpointStore& store, const OrderedJson& r) {
  const auto commit = store.save(r.at("run_dir").get<std::string>(),
                                 r.at("origin_pod").get<std::string>(), checkpoint_info(r));
  return {{"ok", true}, {"commit", commit ? OrderedJson(*commit) : OrderedJson(nullptr)}};
}

// Each run answers as save() would, in the order asked.
// The lease, when asked for, rides in the same push as the runs.
OrderedJson save_all(ck::CheckpointStore& store, const OrderedJson& r) {
  std::vector<ck::SaveRequest> runs;
  for (const auto& run : r.at("runs"))
    runs.push_back({.run_dir = run.at("run_dir").get<std::string>(),
                    .origin_pod = run.at("origin_pod").get<std::string>(),
                    .info = checkpoint_info(run)});
  std::optional<ck::Lease> lease;
  if (r.contains("lease_until"))
    lease = ck::Lease{.pod = r.at("pod").get<std::string>(),
                      .until = r.at("lease_until").get<std::int64_t>()};
  const auto report = store.save_all(runs, lease);
  OrderedJson results = OrderedJson::array();
  for (const auto& outcome : report.runs) {
    OrderedJson result{{"ok", !outcome.error},
                       {"commit", outcome.commit ? OrderedJson(*outcome.commit) : OrderedJson()}};
    if (outcome.error) {
      result["kind"] = outcome.ref == ck::RefOutcome::updated ? "other" : "rejected";
      result["error"] = *outcome.error;
    }
    results.push_back(std::move(result));
  }
  OrderedJson answer{{"ok", true}, {"results", results}};
  if (lease)
    answer["lease"] =
        report.lease_error
            ? OrderedJson{{"ok", false}, {"kind", "other"}, {"error", *report.lease_error}}
            : OrderedJson{{"ok", true}};
  return answer;
}

OrderedJson release(ck::CheckpointStore& store, const OrderedJson& r) {
  store.release(r.at("run_dir").get<std::string>(), r.at("origin_pod").get<std::string>(),
                checkpoint_info(r));
  return {{"ok", true}};
}

// The instance's templates, sent by the caller so that a branch is judged
// before it is claimed.
ChildTemplates templates_of(const OrderedJson& r) {
  return ChildTemplates::from_config({{"children", r.at("children")}}, "");
}

std::map<std::string, ck::LocalRun> local_runs(const OrderedJson& local) {
  std::map<std::string, ck::LocalRun> runs;
  for (const auto& [run_id, run] : local.items())
    runs[run_id] = {.attempts = run.at("attempts").get<std::size_t>(),
                    .origin_pod = run.at("origin_pod").get<std::string>()};
  return runs;
}

OrderedJson restore(ck::CheckpointStore& store, const OrderedJson& r) {
  const auto templates = templates_of(r);
  const auto report = store.restore(
      {.runs_dir = r.at("runs_dir").get<std::string>(),
       .pod = r.at("pod").get<std::string>(),
       .local = local_runs(r.at("local")),
       .judge = [&templates](const ck::RunParams& params) { return templates.judge(params); },
       .only = r.contains("only") ? std::optional(r["only"].get<std::string>()) : std::nullopt,
       .lease_until = r.contains("lease_until")
                          ? std::optional(r["lease_until"].get<std::int64_t>())
                          : std::nullopt,
       .skip = r.value("skip", std::set<std::string>{})});
  OrderedJson claimed = OrderedJson::array();
  for (const auto& run : report.claimed)
    claimed.push_back({{"run_id", run.params.run_id},
                       {"dir", run.dir.string()},
                       {"branch", run.branch},
                       {"claim", run.claim}});
  OrderedJson held = OrderedJson::array();
  for (const auto& run : report.held)
    held.push_back(
        {{"params", ck::to_json(run.params)}, {"branch", run.branch}, {"reason", run.reason}});
  OrderedJson left = OrderedJson::array();
  for (const auto& run : report.left)
    left.push_back({{"run_id", run.run_id}, {"pod", run.pod}, {"until", run.until}});
  return {{"ok", true},
          {"claimed", claimed},
          {"left", left},
          {"held", held},
          {"lost", report.lost},
          {"released", report.released},
          {"ambiguous", report.ambiguous},
          {"problems", report.problems}};
}

OrderedJson commit_json(const ck::CheckpointCommit& c) {
  return {{"oid", c.oid},         {"time", c.time}, {"reason", c.reason},
          {"attempt", c.attempt}, {"pod", c.pod},   {"records", c.records}};
}

OrderedJson summary_json(const ck::BranchSummary& s) {
  return {
      {"run_id", s.name.run_id},   {"origin_pod", s.name.pod}, {"branch", ck::short_branch(s.ref)},
      {"attempts", s.attempts},    {"time", s.tip.time},       {"records", s.tip.records},
      {"size_bytes", s.size_bytes}};
}

// What a restore by this instance would do with the branch: resume it, hold
// it (no such template, a request that no longer validates), refuse it, or
// delete it (the run is over).
void add_state(OrderedJson& summary, const ck::BranchSummary& branch,
               const ChildTemplates& templates) {
  std::optional<std::string> reason;
  std::string state = "resumable";
  try {
    if (!branch.run_params) throw std::runtime_error(branch.problem);
    const auto params = ck::run_params_from_json(*branch.run_params);
    if (params.final_status) {
      state = "finished";
    } else if (auto refusal = templates.judge(params).refusal) {
      state = "held";
      reason = *refusal;
    }
  } catch (const std::exception& e) {
    state = "refused";
    reason = e.what();
  }
  summary["state"] = state;
  summary["reason"] = reason ? OrderedJson(*reason) : OrderedJson(nullptr);
}

OrderedJson list(ck::CheckpointStore& store, const OrderedJson& r) {
  const auto pod = r.contains("pod") ? std::optional(r["pod"].get<std::string>()) : std::nullopt;
  const auto templates = templates_of(r);
  const auto listing = ck::list_branches(store.cache(), store.remote(), pod);
  OrderedJson checkpoints = OrderedJson::array();
  for (const auto& branch : listing.branches) {
    checkpoints.push_back(summary_json(branch));
    add_state(checkpoints.back(), branch, templates);
  }
  return {{"ok", true},
          {"url", store.remote().display_url()},
          {"checkpoints", checkpoints},
          {"problems", listing.problems}};
}

OrderedJson show_branch(ck::CheckpointStore& store, const ck::RemoteBranch& branch) {
  const auto summary = ck::summarize_branch(store.cache(), store.remote(), branch);
  OrderedJson history = OrderedJson::array();
  for (const auto& commit : ck::history(store.cache(), summary.tip.oid))
    history.push_back(commit_json(ck::describe_commit(commit)));
  auto result = summary_json(summary);
  result["ok"] = true;
  result["tip"] = summary.tip.oid;
  result["history"] = history;
  result["run_params"] = summary.run_params ? *summary.run_params : OrderedJson(nullptr);
  return result;
}

// One run's branch, searched on every pod: not_found when no pod holds it,
// ambiguous when several do (the caller then names the branch).
OrderedJson show(ck::CheckpointStore& store, const OrderedJson& r) {
  const auto id = r.at("run_id").get<std::string>();
  const auto found = ck::find_run_branches(store.remote(), id);
  if (found.empty())
    throw ck::GitError(ck::GitErrorKind::not_found,
                       "no checkpoint branch for '" + id + "' on " + store.remote().display_url());
  if (found.size() == 1) return show_branch(store, found.front());
  OrderedJson branches = OrderedJson::array();
  for (const auto& branch : found) branches.push_back(ck::short_branch(branch.ref));
  return {{"ok", false},
          {"kind", "ambiguous"},
          {"error", "'" + id + "' has checkpoints from several pods"},
          {"branches", branches}};
}

ck::PruneRequest prune_request(const OrderedJson& r) {
  ck::PruneRequest request;
  if (r.contains("older_than_seconds"))
    request.older_than_seconds = r["older_than_seconds"].get<std::int64_t>();
  request.run_ids = r.value("run_ids", std::vector<std::string>{});
  request.all = r.value("all", false);
  return request;
}

// Every deletion in one push; each branch is deleted or fails on its own.
OrderedJson prune(ck::CheckpointStore& store, const OrderedJson& r) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  const auto plan = ck::plan_prune(store.cache(), store.remote(), prune_request(r), now);
  std::vector<ck::RefUpdate> deletions;
  for (const auto& ref : plan.refs) deletions.push_back({.ref = ref, .commit = "", .from = {}});
  std::vector<ck::RefResult> results(deletions.size());
  if (!r.value("dry_run", false) && !deletions.empty()) results = store.remote().update(deletions);
  OrderedJson deleted = OrderedJson::array();
  OrderedJson failed = OrderedJson::array();
  for (std::size_t i = 0; i < deletions.size(); ++i) {
    const auto branch = ck::short_branch(deletions[i].ref);
    if (results[i].outcome == ck::RefOutcome::updated)
      deleted.push_back(branch);
    else
      failed.push_back({{"branch", branch}, {"kind", "rejected"}, {"error", results[i].detail}});
  }
  return {{"ok", true},       {"url", store.remote().display_url()}, {"deleted", deleted},
          {"failed", failed}, {"missing", plan.missing_run_ids},     {"problems", plan.problems}};
}

OrderedJson perform(const OrderedJson& request) {
  ck::GitLibrary library;
  ck::CheckpointStore store(store_config(request.at("store")));
  const auto op = request.at("op").get<std::string>();
  if (op == "check") {
    store.cache().check_writable();
    return {{"ok", true}};
  }
  if (op == "save") return save(store, request);
  if (op == "save_all") return save_all(store, request);
  if (op == "lease") {
    ck::hold_lease(store.cache(), store.remote(),
                   {request.at("pod").get<std::string>(), request.at("until").get<std::int64_t>()});
    return {{"ok", true}};
  }
  if (op == "unlease") {
    ck::drop_lease(store.remote(), request.at("pod").get<std::string>());
    return {{"ok", true}};
  }
  if (op == "release") return release(store, request);
  if (op == "restore") return restore(store, request);
  if (op == "list") return list(store, request);
  if (op == "show") return show(store, request);
  if (op == "prune") return prune(store, request);
  throw std::runtime_error("unknown checkpoint-agent op '" + op + "'");
}

}  // namespace

int run_checkpoint_agent() {
  const std::string text{std::istreambuf_iterator<char>(std::cin), {}};
  OrderedJson result;
  try {
    std::string error;
    const auto request = parse_bounded_json(text, kAgentMessageLimits, error);
    if (!request) throw std::runtime_error("checkpoint-agent request: " + error);
    result = perform(*request);
  } catch (const ck::GitError& e) {
    result = {{"ok", false}, {"kind", kind_name(e.kind())}, {"error", e.what()}};
  } catch (const std::exception& e) {
    result = {{"ok", false}, {"kind", "other"}, {"error", e.what()}};
  }
  // Names from branches may not be UTF-8: they are shown replaced, never
  // allowed to abort the answer.
  std::cout << result.dump(-1, ' ', false, OrderedJson::error_handler_t::replace) << std::endl;
  return result["ok"].get<bool>() ? 0 : 1;
}

}  // namespace inflight
