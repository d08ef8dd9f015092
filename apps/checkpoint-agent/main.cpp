// inflight-checkpoint-agent: one git store operation per process, for serve,
// resume and the checkpoints commands (see agent_client.hpp). A binary of its
// own so that the supervisor never loads libgit2 and its TLS and SSH stacks.
#include "inflight/core/process_secrecy.hpp"
#include "operations.hpp"

int main() {
  // It holds the git token, read from stdin, while children run as the same user.
  inflight::forbid_inspection();
  inflight::continue_in_unopened_memory();
  return inflight::run_checkpoint_agent();
}
