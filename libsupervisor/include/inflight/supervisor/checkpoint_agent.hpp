// Checkpoints through a helper process. libgit2 1.5 has no network timeouts,
// so every git network step runs in `inflight checkpoint-agent`, a process
// of its own that serve kills when the step's deadline passes. The request is
// one JSON object on the agent's stdin, the result one JSON object on its
// stdout; secrets travel that way, never in argv.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <functional>
#include <set>

#include "inflight/supervisor/checkpoint_port.hpp"
#include "inflight/supervisor/child_reaper.hpp"
#include "inflight/supervisor/settings.hpp"

namespace inflight {

class AgentCheckpoints final : public CheckpointPort {
 public:
  AgentCheckpoints(boost::asio::io_context& io, ChildReaper& reaper, const StoreSettings& store,
                   std::filesystem::path runs_dir);
  // Kills agents still running: nothing may outlive serve.
  ~AgentCheckpoints() override;

  void save(const CheckpointRequest& request, SteadyClock::time_point deadline,
            std::function<void(CheckpointResult)> done) override;
  void release(const std::string& run_id, const std::string& origin_pod,
               SteadyClock::time_point deadline, std::function<void()> done) override;
  void restore(const std::vector<RestoredRun>& local, SteadyClock::time_point deadline,
               std::function<void(RestoreResult)> done) override;

 private:
  void call(OrderedJson request, SteadyClock::time_point deadline,
            std::function<void(const OrderedJson&)> done);

  boost::asio::io_context& io_;
  ChildReaper& reaper_;
  std::filesystem::path runs_dir_;
  std::string pod_;
  OrderedJson store_;  // holds the token: never logged
  std::string display_url_;
  std::filesystem::path agent_binary_;
  std::set<pid_t> running_;
};

// The agent's side: reads a request on stdin, writes the result on stdout;
// returns the process exit code.
int run_checkpoint_agent();

// Where serve keeps its local cache repo: beside the runs dir.
std::filesystem::path cache_repo_path(const std::filesystem::path& runs_dir);

}  // namespace inflight
