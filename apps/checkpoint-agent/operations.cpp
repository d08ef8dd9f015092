// The agent's side of AgentCheckpoints: one store operation per process, its
// request and answer the structs of agent_protocol.hpp. This file reads the
// request and writes the answer; the ops are in store_operations.cpp and
// command_operations.cpp.
#include "operations.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <set>

#include "inflight/checkpoint/agent_protocol.hpp"
#include "inflight/checkpoint/branch_listing.hpp"
#include "inflight/checkpoint/checkpoint_store.hpp"
#include "inflight/checkpoint/run_listing.hpp"
#include "inflight/core/child_templates.hpp"
#include "inflight/core/exit_code.hpp"
#include "inflight/core/fd.hpp"
#include "inflight/core/log.hpp"
#include "operation_context.hpp"

namespace inflight {

namespace ck = checkpoint;
using agent_ops::Context;

namespace {

ck::StoreConfig store_config(const AgentStore& s) {
  if (s.results_layout != 1 && s.results_layout != 2)
    throw std::invalid_argument("store.results_layout " + std::to_string(s.results_layout) +
                                " is not 1 or 2");
  return {.cache_dir = s.cache_dir,
          .remote = {.url = s.url,
                     .username = s.username,
                     .token = s.token,
                     .ssh_key = s.ssh_key,
                     .ssh_known_hosts = s.known_hosts,
                     .ca_file = s.ca_file},
          .exclude_globs = s.excludes,
          .restore_limits = {.max_bytes = s.restore_max_bytes, .max_files = s.restore_max_files},
          .claim_lease = std::chrono::seconds(s.claim_lease_seconds),
          .publish = s.publish,
          .sweep_temp_after = std::chrono::seconds(s.sweep_temp_after_seconds),
          .results_ref_retention = std::chrono::seconds(s.results_ref_retention_seconds),
          .results_layout = static_cast<int>(s.results_layout)};
}

template <class Answer>
OrderedJson message(const Answer& answer) {
  return answer_message(answer);
}

template <class Answer>
OrderedJson message(const Result<Answer>& outcome) {
  if (!outcome) return failure_message(outcome.error());
  return answer_message(*outcome);
}

// The whole answer message of one op.
using Operation = std::function<OrderedJson(Context&, const OrderedJson& call)>;

// The op's call read into its struct, and its answer written from its struct.
template <class Call, class Result>
std::pair<std::string_view, Operation> operation(Result (*perform)(Context&, const Call&)) {
  return {Call::op, [perform](Context& c, const OrderedJson& call) {
            return message(perform(c, call.get<Call>()));
          }};
}

const std::map<std::string_view, Operation>& operations() {
  static const std::map<std::string_view, Operation> all{
      operation(agent_ops::check),        operation(agent_ops::save),
      operation(agent_ops::save_all),     operation(agent_ops::release),
      operation(agent_ops::hold_lease),   operation(agent_ops::drop_lease),
      operation(agent_ops::restore),      operation(agent_ops::list),
      operation(agent_ops::show),         operation(agent_ops::prune),
      operation(agent_ops::list_runs),    operation(agent_ops::show_run),
      operation(agent_ops::run_log),      operation(agent_ops::prune_runs),
      operation(agent_ops::migrate_runs), operation(agent_ops::look_up),
      operation(agent_ops::compact_runs)};
  return all;
}

// What the op pushed has landed whatever happens here: a cache that cannot
// keep it costs the next save a fetch of its parent, not this answer.
void keep_objects(ck::CheckpointStore& store) {
  try {
    store.persist();
  } catch (const ck::GitError& e) {
    log::warn("cache cannot keep the new objects", {{"error", e.what()}});
  }
}

// One message: a line of stdin, or the rest of it. Each is bounded.
std::optional<std::string> read_message(std::istream& in) {
  std::string text;
  for (int c = in.get(); c != EOF && c != '\n'; c = in.get()) {
    if (text.size() == kAgentMessageLimits.max_bytes)
      throw std::runtime_error("checkpoint-agent message longer than " +
                               std::to_string(kAgentMessageLimits.max_bytes) + " bytes");
    text.push_back(static_cast<char>(c));
  }
  if (text.empty() && in.eof()) return std::nullopt;
  return text;
}

OrderedJson parsed_message(const std::string& text) {
  auto message = parse_bounded_json(text, kAgentMessageLimits);
  if (!message) throw std::runtime_error("checkpoint-agent request: " + message.error().message);
  return std::move(*message);
}

OrderedJson next_message() {
  const auto text = read_message(std::cin);
  if (!text) throw std::runtime_error("checkpoint-agent request: stdin ended before its last part");
  return parsed_message(*text);
}

// The version and the op are read first: a caller of another release learns
// that, not which field it lacks.
OrderedJson perform(const OrderedJson& message) {
  const auto refused = [](std::string why) {
    return failure_message({.kind = Failure::other, .message = std::move(why), .candidates = {}});
  };
  const auto version = message.at("version").get<int>();
  if (version != kAgentProtocolVersion)
    return refused("the caller speaks protocol " + std::to_string(version) + ", this agent " +
                   std::to_string(kAgentProtocolVersion) +
                   ": install both binaries of one release");
  const auto name = message.at("op").get<std::string>();
  const auto op = operations().find(name);
  if (op == operations().end()) return refused("unknown checkpoint-agent op '" + name + "'");
  const auto request = message.get<AgentRequest>();
  ck::GitLibrary library;
  ck::CheckpointStore store(store_config(request.store));
  if (const auto swept = store.swept_temp_files())
    log::info("temp files of killed agents removed from the cache",
              {{"files", swept}, {"cache", request.store.cache_dir}});
  Context context{.store = store,
                  .pod = request.pod,
                  .next_message = next_message,
                  .max_file_bytes = request.store.restore_max_bytes};
  OrderedJson answer;
  try {
    answer = op->second(context, request.call);
  } catch (...) {
    // What the op pushed before it failed (a release's final state, before
    // its refused deletion) has landed: kept, or the next save builds on an
    // older commit and is judged another instance's.
    if (context.keep_objects) keep_objects(store);
    throw;
  }
  if (context.keep_objects) keep_objects(store);
  return answer;
}

OrderedJson answer() {
  try {
    return perform(parsed_message(read_message(std::cin).value_or("")));
  } catch (const ck::GitError& e) {
    return failure_message(e.error());
  } catch (const std::exception& e) {
    return failure_message({.kind = Failure::other, .message = e.what(), .candidates = {}});
  }
}

}  // namespace

int run_checkpoint_agent() {
  const auto result = answer();
  // Names from branches may not be UTF-8: they are shown replaced, never
  // allowed to abort the answer.
  std::cout << result.dump(-1, ' ', false, OrderedJson::error_handler_t::replace) << std::endl;
  return result["ok"].get<bool>() ? kExitSuccess : kExitFailure;
}

}  // namespace inflight
