// What the scheduler's two files share (checkpoint_scheduler.cpp,
// store_batches.cpp): a run's request, the answer for a fenced run, and the
// backoff after a refusal.
#pragma once

#include <algorithm>

#include "inflight/supervisor/checkpoint_port.hpp"
#include "inflight/supervisor/runs/run.hpp"

namespace inflight {

inline CheckpointRequest checkpoint_request(Run& run, checkpoint::CheckpointReason reason) {
  return {.run_dir = std::filesystem::absolute(run.dir).string(),
          .origin_pod = run.params.origin_pod,
          .run_id = run.id,
          .attempt = run.attempts(),
          .reason = reason,
          .records = run.record_count(),
          .total = run.records_expected()};
}

// The answer for a run another instance owns: nothing is sent to the store.
inline CheckpointResult fenced_result() {
  return Error{
      .kind = Failure::rejected, .message = "another instance owns the run", .candidates = {}};
}

// A push the server's rules refused is tried again after doubling waits, so
// that a declining hook is not asked every tick.
inline void back_off(CheckpointState& state) {
  constexpr int kMaxTicksSkipped = 15;
  state.ticks_to_skip = std::min((1 << std::min(state.refusals, 4)) - 1, kMaxTicksSkipped);
  ++state.refusals;
}

}  // namespace inflight
