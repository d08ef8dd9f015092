// The checkpoint agent's answer (agent_protocol.hpp) on any bytes, as serve
// reads it: the agent parses branches anyone can write, and an agent of
// another release may answer under a running serve. Any output is an answer
// or a failure that says what is wrong with it, read into each answer's
// struct; nothing throws past read_reply.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "inflight/checkpoint/agent_commands.hpp"
#include "inflight/checkpoint/agent_protocol.hpp"

namespace {

template <class Answer>
void read_as(const inflight::Result<inflight::OrderedJson>& output) {
  const auto reply = inflight::read_reply<Answer>(output);
  if (!reply && reply.error().message.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace inflight::agent;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto output = inflight::read_output(text);
  if (!output && output.error().message.empty()) std::abort();
  read_as<Restored>(output);
  read_as<SavedAll>(output);
  read_as<Saved>(output);
  read_as<Published>(output);
  read_as<Released>(output);
  read_as<LookedUpRuns>(output);
  read_as<RunsMigrated>(output);
  read_as<RunsCompacted>(output);
  return 0;
}
