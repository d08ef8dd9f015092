// Runs git store operations in `inflight-checkpoint-agent` (found by
// sibling_binaries.hpp), a process of its own per operation. libgit2 1.5 has
// no network timeouts, so the agent is killed when the operation's deadline
// passes. The request is one JSON object on the agent's stdin, the result one
// JSON object on its stdout: secrets travel that way, never in argv.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <functional>
#include <set>
#include <string>

#include "inflight/bounded_json.hpp"
#include "inflight/supervisor/child_reaper.hpp"
#include "inflight/supervisor/clock.hpp"
#include "inflight/supervisor/settings.hpp"

namespace inflight {

// Either side's message: a restore answer carries the run-params of every
// run it holds back, each at most 1 MiB.
inline constexpr JsonLimits kAgentMessageLimits{.max_bytes = 256u << 20, .max_depth = 64};

class AgentClient {
 public:
  AgentClient(boost::asio::io_context& io, ChildReaper& reaper, const StoreSettings& store,
              const std::filesystem::path& runs_dir);
  // Kills agents still running: nothing may outlive the caller.
  ~AgentClient();
  AgentClient(const AgentClient&) = delete;
  AgentClient& operator=(const AgentClient&) = delete;

  // `done` gets the agent's result, or {"ok":false,"kind":"deadline"} when it
  // had to be killed.
  void call(OrderedJson request, SteadyClock::time_point deadline,
            std::function<void(const OrderedJson&)> done);

 private:
  boost::asio::io_context& io_;
  ChildReaper& reaper_;
  OrderedJson store_;  // holds the token: never logged
  std::string display_url_;
  std::filesystem::path agent_binary_;
  std::set<pid_t> running_;
};

// One operation, waited for: for commands that do nothing else meanwhile.
OrderedJson call_agent(const StoreSettings& store, const std::filesystem::path& runs_dir,
                       OrderedJson request, Duration timeout);

// Where the local cache repo lives: beside the runs dir.
std::filesystem::path cache_repo_path(const std::filesystem::path& runs_dir);

}  // namespace inflight
