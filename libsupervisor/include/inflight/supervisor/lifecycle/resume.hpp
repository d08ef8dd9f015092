// `inflight resume`: an operator's recovery of one run in the foreground.
#pragma once

#include <string>

#include "inflight/supervisor/checkpoint_port.hpp"
#include "inflight/supervisor/config/settings.hpp"
#include "inflight/supervisor/runs/run_supervisor.hpp"

namespace inflight {

struct ResumeFlags {
  // Stop once the run dir is materialised and its branch claimed.
  bool restore_only = false;
  // Take the run even from a pod whose lease is present, or from another
  // command's claim: a one-shot command cannot watch a lease for its term.
  bool take_over = false;
};

// The supervisor of a command that runs one run in the foreground (`resume`,
// `run`): one child at a time, its output echoed to the terminal.
SupervisorSettings foreground_supervision(const ResumeSettings& settings,
                                          const std::filesystem::path& runs_dir,
                                          Containment containment, ModelGateway& models);

// A take-over's claims lost to the holder's checkpoints, each landed between
// the listing and the claim. Waiting would leave the run to the holder it
// means to take, so a lost claim is made again at once; but a holder whose
// checkpoints land faster than a claim (a short interval, a slow link) wins
// every race, and after kMaxRaces the command treats the run as it would
// without --take-over.
class TakeOverRaces {
 public:
  static constexpr int kMaxRaces = 5;

  explicit TakeOverRaces(bool take_over) : take_over_(take_over) {}
  // Whether to claim the new tip at once (logged, as is the giving up).
  bool claim_again(const RestoreResult& result, const std::string& run_id);
  bool gave_up() const { return lost_ > kMaxRaces; }

 private:
  bool take_over_;
  int lost_ = 0;
};

// `inflight resume RUN_ID|BRANCH`: restores one run exactly as serve does on
// start, runs its next attempt in the foreground with its output streamed,
// and returns the child's exit code (3 when the store refused or could not be
// reached, 4 when there is no such run).
int resume(const ResumeSettings& settings, const std::string& target, ResumeFlags flags);

}  // namespace inflight
