// The envelope of the agent's answer (agent_protocol.hpp): written by the
// agent, read by every caller.
#include "inflight/checkpoint/agent_protocol.hpp"

namespace inflight {

namespace {

Error failed_output(std::string error) {
  return {.kind = Failure::other, .message = std::move(error), .candidates = {}};
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
