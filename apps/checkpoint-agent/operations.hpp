// The agent's side of the protocol in agent_client.hpp: one store operation
// per process, the request read from stdin, the result written to stdout.
#pragma once

namespace inflight {

// Returns the process exit code: 0 when the operation succeeded.
int run_checkpoint_agent();

}  // namespace inflight
