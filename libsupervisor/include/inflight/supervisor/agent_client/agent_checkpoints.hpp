// The checkpoint port of serve: every store operation runs through the agent
// (agent_client.hpp), bounded by its deadline.
#pragma once

#include <filesystem>
#include <set>

#include "inflight/core/child_templates.hpp"
#include "inflight/supervisor/agent_client/agent_client.hpp"
#include "inflight/supervisor/checkpoint_port.hpp"

namespace inflight {

class AgentCheckpoints final : public CheckpointPort {
 public:
  AgentCheckpoints(boost::asio::io_context& io, ChildReaper& reaper, const StoreSettings& store,
                   std::filesystem::path runs_dir, const ChildTemplates& templates);

  void save(const CheckpointRequest& request, SteadyClock::time_point deadline,
            std::function<void(CheckpointResult)> done) override;
  void save_all(const SaveAllRequest& request, SteadyClock::time_point deadline,
                std::function<void(SaveAllResult)> done) override;
  std::unique_ptr<SaveStream> open_save_all(SteadyClock::time_point deadline) override;
  void release(const std::vector<CheckpointRequest>& requests, SteadyClock::time_point deadline,
               std::function<void(std::vector<CheckpointResult>)> done) override;
  void check(SteadyClock::time_point deadline, std::function<void(CheckpointResult)> done) override;
  void restore(const RestoreQuery& query, SteadyClock::time_point deadline,
               std::function<void(RestoreResult)> done) override;
  void hold_lease(SystemClock::time_point until, SteadyClock::time_point deadline,
                  std::function<void(CheckpointResult)> done) override;
  void drop_lease(SteadyClock::time_point deadline,
                  std::function<void(CheckpointResult)> done) override;
  void look_up(const std::vector<std::string>& run_ids, SteadyClock::time_point deadline,
               std::function<void(Result<std::vector<checkpoint::LookedUpRun>>)> done) override;

 private:
  // A step whose answer is one run's (or none's) result.
  template <class Call>
  void step(const Call& call, SteadyClock::time_point deadline,
            std::function<void(CheckpointResult)> done);
  static RestoreResult failed_restore(const Error& failure, const std::vector<RestoredRun>& local);
  RestoreResult restore_result(const agent::Restored& r, const std::vector<RestoredRun>& local);

  AgentClient agent_;
  // What the last restore could not use. A look comes every lease period:
  // a problem it reported too (a bad index file, a hostile branch) is
  // not logged again.
  std::set<std::string> last_problems_;
  std::filesystem::path runs_dir_;
  const ChildTemplates& templates_;
};

}  // namespace inflight
