// The serve side of checkpoints: every store operation through the agent.
#include <set>

#include "inflight/checkpoint/run_params.hpp"
#include "inflight/supervisor/checkpoint_agent.hpp"
#include "inflight/supervisor/log.hpp"

namespace inflight {

namespace fs = std::filesystem;

AgentCheckpoints::AgentCheckpoints(boost::asio::io_context& io, ChildReaper& reaper,
                                   const StoreSettings& store, fs::path runs_dir)
    : agent_(io, reaper, store, runs_dir), runs_dir_(std::move(runs_dir)), pod_(store.pod_name) {}

void AgentCheckpoints::save(const CheckpointRequest& request, SteadyClock::time_point deadline,
                            std::function<void(CheckpointResult)> done) {
  const std::string branch = "inflight/" + request.origin_pod + "/" + request.run_id;
  agent_.call({{"op", "save"},
               {"run_dir", fs::absolute(request.run_dir).string()},
               {"origin_pod", request.origin_pod},
               {"run_id", request.run_id},
               {"attempt", request.attempt},
               {"reason", request.reason},
               {"pod", pod_},
               {"records", request.records}},
              deadline, [done = std::move(done), branch](const OrderedJson& r) {
                CheckpointResult result;
                result.branch = branch;
                result.landed = r["ok"].get<bool>();
                result.fenced = r.value("kind", "") == "rejected";
                if (r.contains("commit") && r["commit"].is_string()) result.commit = r["commit"];
                result.error = r.value("error", "");
                done(result);
              });
}

void AgentCheckpoints::release(const std::string& run_id, const std::string& origin_pod,
                               SteadyClock::time_point deadline, std::function<void()> done) {
  agent_.call(
      {{"op", "release"}, {"origin_pod", origin_pod}, {"run_id", run_id}}, deadline,
      [done = std::move(done), run_id](const OrderedJson& r) {
        if (!r["ok"].get<bool>())
          log::warn("checkpoint branch not deleted", {{"run_id", run_id}, {"error", r["error"]}});
        else
          log::info("checkpoint branch deleted", {{"run_id", run_id}});
        done();
      });
}

void AgentCheckpoints::restore(const std::vector<RestoredRun>& local,
                               SteadyClock::time_point deadline,
                               const std::optional<std::string>& only,
                               std::function<void(RestoreResult)> done) {
  OrderedJson attempts = OrderedJson::object();
  for (const auto& run : local) attempts[run.params.run_id] = run.params.attempts.size();
  OrderedJson request{
      {"op", "restore"}, {"runs_dir", runs_dir_.string()}, {"pod", pod_}, {"local", attempts}};
  if (only) request["only"] = *only;
  agent_.call(std::move(request), deadline, [local, done = std::move(done)](const OrderedJson& r) {
    if (!r["ok"].get<bool>()) {
      const auto error = r["error"].get<std::string>();
      if (r.value("kind", "") == "auth") return done({local, error, std::nullopt});
      log::error("restore from the results repo failed; resuming local runs only",
                 {{"error", error}});
      return done({local, std::nullopt, error});
    }
    for (const auto& problem : r["problems"])
      log::warn("checkpoint not restored", {{"error", problem}});
    std::set<std::string> taken;
    std::vector<RestoredRun> runs;
    for (const auto& lost : r["lost"]) {
      taken.insert(lost.get<std::string>());
      log::info("run claimed by another instance; left to it", {{"run_id", lost}});
    }
    for (const auto& c : r["claimed"]) {
      const fs::path dir = c["dir"].get<std::string>();
      auto params = checkpoint::read_run_params(dir);
      if (!params) continue;
      taken.insert(params->run_id);
      // `refs/heads/inflight/…` → `inflight/…`, as statuses show it.
      runs.push_back({dir, std::move(*params), c["branch"].get<std::string>().substr(11),
                      c.value("claim", "")});
    }
    for (const auto& run : local)
      if (!taken.count(run.params.run_id)) runs.push_back(run);
    done({std::move(runs), std::nullopt, std::nullopt});
  });
}

}  // namespace inflight
