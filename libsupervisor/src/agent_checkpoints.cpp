// The serve side of checkpoints: every store operation through the agent.
#include <algorithm>
#include <set>

#include "inflight/checkpoint/branch_name.hpp"
#include "inflight/checkpoint/run_params.hpp"
#include "inflight/supervisor/checkpoint_agent.hpp"
#include "inflight/supervisor/log.hpp"

namespace inflight {

namespace fs = std::filesystem;

namespace {

// The agent's answer to a store step on `branch` (none for a check).
CheckpointResult checkpoint_result(const OrderedJson& r, std::string branch) {
  const auto kind = r.value("kind", "");
  return {.landed = r["ok"].get<bool>(),
          .fenced = kind == "rejected",
          .disk_failed = kind == "cache",
          .branch = std::move(branch),
          .commit = r.contains("commit") && r["commit"].is_string()
                        ? std::optional(r["commit"].get<std::string>())
                        : std::nullopt,
          .error = r.value("error", "")};
}

// Whether a part of a batched answer is one step's answer.
bool answer_of_one(const OrderedJson& one) {
  return one.is_object() && one.value("ok", OrderedJson()).is_boolean();
}

std::int64_t epoch_seconds(SystemClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

}  // namespace

AgentCheckpoints::AgentCheckpoints(boost::asio::io_context& io, ChildReaper& reaper,
                                   const StoreSettings& store, fs::path runs_dir,
                                   const ChildTemplates& templates)
    : agent_(io, reaper, store, runs_dir),
      runs_dir_(std::move(runs_dir)),
      pod_(store.pod_name),
      templates_(templates) {}

void AgentCheckpoints::save(const CheckpointRequest& request, SteadyClock::time_point deadline,
                            std::function<void(CheckpointResult)> done) {
  store_call("save", request, deadline, std::move(done));
}

void AgentCheckpoints::release(const CheckpointRequest& request, SteadyClock::time_point deadline,
                               std::function<void(CheckpointResult)> done) {
  store_call("release", request, deadline, std::move(done));
}

OrderedJson AgentCheckpoints::store_request(const CheckpointRequest& request) const {
  return {{"run_dir", fs::absolute(request.run_dir).string()},
          {"origin_pod", request.origin_pod},
          {"run_id", request.run_id},
          {"attempt", request.attempt},
          {"reason", request.reason},
          {"pod", pod_},
          {"records", request.records}};
}

// Save and release name the run alike and answer alike.
void AgentCheckpoints::store_call(const char* op, const CheckpointRequest& request,
                                  SteadyClock::time_point deadline,
                                  std::function<void(CheckpointResult)> done) {
  const auto branch = checkpoint::branch_name({request.origin_pod, request.run_id});
  auto call = store_request(request);
  call["op"] = op;
  agent_.call(std::move(call), deadline, [done = std::move(done), branch](const OrderedJson& r) {
    done(checkpoint_result(r, branch));
  });
}

// A failure of the whole step (unreachable, deadline, disk) is every run's
// and the lease's.
void AgentCheckpoints::save_all(const SaveAllRequest& request, SteadyClock::time_point deadline,
                                std::function<void(SaveAllResult)> done) {
  OrderedJson runs = OrderedJson::array();
  std::vector<std::string> branches;
  for (const auto& run : request.runs) {
    runs.push_back(store_request(run));
    branches.push_back(checkpoint::branch_name({run.origin_pod, run.run_id}));
  }
  OrderedJson call{{"op", "save_all"}, {"pod", pod_}, {"runs", std::move(runs)}};
  if (request.lease_until) call["lease_until"] = epoch_seconds(*request.lease_until);
  const bool lease = request.lease_until.has_value();
  agent_.call(
      std::move(call), deadline, [done = std::move(done), branches, lease](const OrderedJson& r) {
        // A whole answer that lacks a part fails that part.
        const OrderedJson missing{
            {"ok", false}, {"kind", "other"}, {"error", "the agent's answer lacks it"}};
        const auto& whole = r["ok"].get<bool>() ? missing : r;
        const bool each = r["ok"].get<bool>() && r.contains("results") && r["results"].is_array() &&
                          r["results"].size() == branches.size() &&
                          std::all_of(r["results"].begin(), r["results"].end(), answer_of_one);
        SaveAllResult result;
        for (std::size_t i = 0; i < branches.size(); ++i)
          result.runs.push_back(checkpoint_result(each ? r["results"][i] : whole, branches[i]));
        const bool lease_answered =
            r["ok"].get<bool>() && r.contains("lease") && answer_of_one(r["lease"]);
        if (lease) result.lease = checkpoint_result(lease_answered ? r["lease"] : whole, "");
        done(std::move(result));
      });
}

void AgentCheckpoints::check(SteadyClock::time_point deadline,
                             std::function<void(CheckpointResult)> done) {
  agent_.call({{"op", "check"}}, deadline,
              [done = std::move(done)](const OrderedJson& r) { done(checkpoint_result(r, "")); });
}

void AgentCheckpoints::hold_lease(SystemClock::time_point until, SteadyClock::time_point deadline,
                                  std::function<void(CheckpointResult)> done) {
  agent_.call({{"op", "lease"}, {"pod", pod_}, {"until", epoch_seconds(until)}}, deadline,
              [done = std::move(done)](const OrderedJson& r) { done(checkpoint_result(r, "")); });
}

void AgentCheckpoints::drop_lease(SteadyClock::time_point deadline,
                                  std::function<void(CheckpointResult)> done) {
  agent_.call({{"op", "unlease"}, {"pod", pod_}}, deadline,
              [done = std::move(done)](const OrderedJson& r) { done(checkpoint_result(r, "")); });
}

void AgentCheckpoints::restore(const RestoreQuery& query, SteadyClock::time_point deadline,
                               std::function<void(RestoreResult)> done) {
  OrderedJson local_runs = OrderedJson::object();
  for (const auto& run : query.local)
    local_runs[run.params.run_id] = {{"attempts", run.params.attempts.size()},
                                     {"origin_pod", run.params.origin_pod}};
  OrderedJson request{{"op", "restore"},    {"runs_dir", runs_dir_.string()},
                      {"pod", pod_},        {"local", local_runs},
                      {"skip", query.skip}, {"children", templates_.sources()}};
  if (query.only) request["only"] = *query.only;
  if (query.lease_until) request["lease_until"] = epoch_seconds(*query.lease_until);
  agent_.call(std::move(request), deadline,
              [local = query.local, done = std::move(done)](const OrderedJson& r) {
                if (!r["ok"].get<bool>()) return done(failed_restore(r, local));
                done(restore_result(r, local));
              });
}

// The store could not be asked: the local runs are resumed as they are.
RestoreResult AgentCheckpoints::failed_restore(const OrderedJson& r,
                                               const std::vector<RestoredRun>& local) {
  const auto error = r["error"].get<std::string>();
  RestoreResult result;
  result.runs = local;
  if (r.value("kind", "") == "auth") {
    result.refused = error;
    return result;
  }
  log::error("restore from the results repo failed; resuming local runs only", {{"error", error}});
  result.unreachable = error;
  if (r.value("kind", "") == "cache") result.disk_failed = error;
  return result;
}

// The agent's report as runs to adopt: every claimed run, and the local runs
// that no branch spoke for.
RestoreResult AgentCheckpoints::restore_result(const OrderedJson& r,
                                               const std::vector<RestoredRun>& local) {
  RestoreResult result;
  for (const auto& problem : r["problems"])
    log::warn("checkpoint not restored", {{"error", problem}});
  for (const auto& branch : r["released"])
    log::info("checkpoint branch of a finished run deleted", {{"branch", branch}});
  std::set<std::string> taken;
  for (const auto& lost : r["lost"]) {
    taken.insert(lost.get<std::string>());
    result.left.push_back({.run_id = lost.get<std::string>(), .pod = "", .until = 0});
    log::info("run claimed by another instance; left to it", {{"run_id", lost}});
  }
  for (const auto& left : r["left"]) {
    result.left.push_back({.run_id = left["run_id"].get<std::string>(),
                           .pod = left["pod"].get<std::string>(),
                           .until = left["until"].get<std::int64_t>()});
    taken.insert(result.left.back().run_id);
    log::info("run held by another live instance; left to it",
              {{"run_id", left["run_id"]}, {"pod", left["pod"]}, {"until", left["until"]}});
  }
  for (const auto& held : r["held"]) {
    try {
      auto params = checkpoint::run_params_from_json(held["params"]);
      taken.insert(params.run_id);
      result.held.push_back({.params = std::move(params),
                             .branch = checkpoint::short_branch(held["branch"].get<std::string>()),
                             .reason = held["reason"].get<std::string>()});
    } catch (const std::exception& e) {
      log::error("held run not shown", {{"error", e.what()}});
    }
  }
  for (const auto& c : r["claimed"]) {
    const fs::path dir = c["dir"].get<std::string>();
    try {
      auto params = checkpoint::read_run_params(dir);
      if (!params) continue;
      taken.insert(params->run_id);
      result.runs.push_back({.dir = dir,
                             .params = std::move(*params),
                             .branch = checkpoint::short_branch(c["branch"].get<std::string>()),
                             .claim = c.value("claim", "")});
    } catch (const std::exception& e) {
      log::error("restored run not adopted", {{"dir", dir.string()}, {"error", e.what()}});
    }
  }
  for (const auto& run : local)
    if (!taken.count(run.params.run_id)) result.runs.push_back(run);
  result.ambiguous = r.value("ambiguous", std::vector<std::string>{});
  return result;
}

}  // namespace inflight
