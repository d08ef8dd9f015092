// The envelope of the agent's answer (agent_protocol.hpp): written by the
// agent, read by every caller.
#include "inflight/checkpoint/agent_protocol.hpp"

namespace inflight {

namespace {

AgentOutput failed_output(std::string error) {
  return {.answer = std::nullopt,
          .failure = {.kind = Failure::other, .error = std::move(error), .branches = {}}};
}

}  // namespace

OrderedJson answer_message(const OrderedJson& answer) {
  return {{"version", kAgentProtocolVersion}, {"ok", true}, {"answer", answer}};
}

OrderedJson failure_message(const AgentFailure& failure) {
  return {{"version", kAgentProtocolVersion}, {"ok", false}, {"failure", failure}};
}

AgentOutput read_output(std::string_view output) {
  if (output.empty()) return failed_output("the checkpoint agent gave no answer");
  std::string error;
  const auto message = parse_bounded_json(output, kAgentMessageLimits, error);
  if (!message) return failed_output("the checkpoint agent's answer is malformed: " + error);
  try {
    const auto version = message->at("version").get<int>();
    if (version != kAgentProtocolVersion)
      return failed_output("the checkpoint agent speaks protocol " + std::to_string(version) +
                           ", this inflight " + std::to_string(kAgentProtocolVersion) +
                           ": install both binaries of one release");
    if (message->at("ok").get<bool>())
      return {.answer = std::optional<OrderedJson>(std::in_place, message->at("answer")),
              .failure = {}};
    return {.answer = std::nullopt, .failure = message->at("failure").get<AgentFailure>()};
  } catch (const std::exception& e) {
    return failed_output(std::string("the checkpoint agent's answer is malformed: ") + e.what());
  }
}

}  // namespace inflight
