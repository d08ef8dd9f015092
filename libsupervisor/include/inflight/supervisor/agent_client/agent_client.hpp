// Runs git store operations in `inflight-checkpoint-agent` (found by
// sibling_binaries.hpp), a process of its own per operation. libgit2 1.5 has
// no network timeouts, so the agent is killed when the operation's deadline
// passes. The request is one JSON object on the agent's stdin, the answer one
// JSON object on its stdout (agent_protocol.hpp): secrets travel that way,
// never in argv.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "inflight/checkpoint/agent_protocol.hpp"
#include "inflight/core/clock.hpp"
#include "inflight/supervisor/config/settings.hpp"
#include "inflight/supervisor/process/child_reaper.hpp"

namespace inflight {

// The stdin of an agent whose request has parts that follow it
// (agent_protocol.hpp's SaveAllPart): one message per line.
class AgentInput {
 public:
  virtual ~AgentInput() = default;
  virtual void write(const OrderedJson& part) = 0;
  virtual void close() = 0;  // after what was written
};

class AgentClient {
 public:
  AgentClient(boost::asio::io_context& io, ChildReaper& reaper, const StoreSettings& store,
              const std::filesystem::path& runs_dir);
  // Kills agents still running: nothing may outlive the caller.
  ~AgentClient();
  AgentClient(const AgentClient&) = delete;
  AgentClient& operator=(const AgentClient&) = delete;

  // `done` gets the agent's answer, or a failure of kind `deadline` when it
  // had to be killed.
  template <class Call>
  void call(const Call& call, SteadyClock::time_point deadline,
            std::function<void(AgentReply<typename Call::Answer>)> done) {
    send(std::string(Call::op), call, deadline, reader(std::move(done)));
  }
  // call() of a request whose parts follow: written to the input returned,
  // which the caller closes after the last.
  template <class Call>
  std::shared_ptr<AgentInput> open(const Call& call, SteadyClock::time_point deadline,
                                   std::function<void(AgentReply<typename Call::Answer>)> done) {
    return open(std::string(Call::op), call, deadline, reader(std::move(done)));
  }

 private:
  template <class Answer>
  static std::function<void(const Result<OrderedJson>&)> reader(
      std::function<void(AgentReply<Answer>)> done) {
    return
        [done = std::move(done)](const Result<OrderedJson>& out) { done(read_reply<Answer>(out)); };
  }
  void send(std::string op, OrderedJson call, SteadyClock::time_point deadline,
            std::function<void(const Result<OrderedJson>&)> done);
  std::shared_ptr<AgentInput> open(std::string op, OrderedJson call,
                                   SteadyClock::time_point deadline,
                                   std::function<void(const Result<OrderedJson>&)> done);

  boost::asio::io_context& io_;
  ChildReaper& reaper_;
  AgentStore store_;  // holds the token: never logged
  std::string pod_;
  std::string display_url_;
  std::filesystem::path agent_binary_;
  std::vector<std::string> env_;  // serve's, less INFLIGHT_* and the children's secrets
  std::set<pid_t> running_;
};

// One operation, waited for: for commands that do nothing else meanwhile.
template <class Call>
AgentReply<typename Call::Answer> call_agent(const StoreSettings& store, const Call& call,
                                             Duration timeout) {
  boost::asio::io_context io;
  ChildReaper reaper(io);
  AgentClient client(io, reaper, store, store.runs_dir);
  std::optional<AgentReply<typename Call::Answer>> reply;
  // The reaper always waits for the next SIGCHLD: the answer ends the loop.
  client.call(call, SteadyClock::now() + timeout, [&](AgentReply<typename Call::Answer> r) {
    reply.emplace(std::move(r));
    io.stop();
  });
  io.run();
  return std::move(*reply);
}

// The same within --git-timeout: how the operator commands bound each call.
template <class Call>
AgentReply<typename Call::Answer> call_agent(const StoreSettings& store, const Call& call) {
  return call_agent(store, call, store.git_timeout);
}

// Where the local cache repo lives: beside the runs dir.
std::filesystem::path cache_repo_path(const std::filesystem::path& runs_dir);

}  // namespace inflight
