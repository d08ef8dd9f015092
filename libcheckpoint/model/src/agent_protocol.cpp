// The envelope of the agent's answer (agent_protocol.hpp): written by the
// agent, read by every caller.
#include "inflight/checkpoint/agent_protocol.hpp"

#include <algorithm>

namespace inflight {

namespace {

Error failed_output(std::string error) {
  return {.kind = Failure::other, .message = std::move(error), .candidates = {}};
}

// The agent writes no fractional number, and one where a struct reads an integer converts beyond
// the integer's range to undefined behaviour (the fuzz target found a version of 1e117): any is
// refused before a field is read. A "params" value is a run-params.json as a branch held it,
// which run_params_from_json judges when it is read.
bool holds_fraction(const OrderedJson& json) {
  if (json.is_number_float()) return true;
  if (json.is_array())
    return std::any_of(json.begin(), json.end(), [](const auto& v) { return holds_fraction(v); });
  if (json.is_object())
    for (const auto& [key, value] : json.items())
      if (key != "params" && holds_fraction(value)) return true;
  return false;
}

}  // namespace

OrderedJson answer_message(const OrderedJson& answer) {
  return {{"version", kAgentProtocolVersion}, {"ok", true}, {"answer", answer}};
}

OrderedJson failure_message(const Error& failure) {
  return {{"version", kAgentProtocolVersion}, {"ok", false}, {"failure", failure}};
}

Result<OrderedJson> read_output(std::string_view output) {
  if (output.empty()) return failed_output("the checkpoint agent gave no answer");
  const auto message = parse_bounded_json(output, kAgentMessageLimits);
  if (!message)
    return failed_output("the checkpoint agent's answer is malformed: " + message.error().message);
  if (holds_fraction(*message))
    return failed_output(
        "the checkpoint agent's answer is malformed: it holds a fractional number");
  try {
    const auto version = message->at("version").get<int>();
    if (version != kAgentProtocolVersion)
      return failed_output("the checkpoint agent speaks protocol " + std::to_string(version) +
                           ", this inflight " + std::to_string(kAgentProtocolVersion) +
                           ": install both binaries of one release");
    if (message->at("ok").get<bool>()) return OrderedJson(message->at("answer"));
    return message->at("failure").get<Error>();
  } catch (const std::exception& e) {
    return failed_output(std::string("the checkpoint agent's answer is malformed: ") + e.what());
  }
}

}  // namespace inflight
