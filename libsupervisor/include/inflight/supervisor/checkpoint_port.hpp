// What the supervisor needs from the checkpoint store, and no more. Every call
// completes asynchronously on the supervisor's io_context and honours its
// deadline, so a hung git server can never hold the event loop.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "inflight/checkpoint/agent_protocol.hpp"
#include "inflight/checkpoint/store_types.hpp"
#include "inflight/core/clock.hpp"
#include "inflight/core/failure.hpp"
#include "inflight/core/run_params.hpp"

namespace inflight {

// The port speaks the agent's messages (agent_protocol.hpp,
// docs/agent-protocol.md): each request and each answer has this one
// representation in serve, and the agent client sends them as they are.
// A run's checkpoint; `run_dir` is absolute.
using CheckpointRequest = agent::RunCheckpoint;

// A step that landed: its commit (none when nothing changed), and what a
// run's checkpoint left out.
using Landed = agent::Saved;

// A store step: landed, or why not. Failure::rejected: another instance owns
// the run, stop touching it; Failure::cache: this disk's cache repo cannot be
// opened or written; Failure::over_limit: the run dir holds more than a
// restore takes, even with what a restore refuses left out.
using CheckpointResult = agent::StepResult;

// One store step for many runs (a shutdown, a periodic tick): their saves,
// the lease's renewal (`lease_until`, seconds since the epoch) or release,
// and finished runs' release steps (checkpoint::ReleaseSteps): final states
// with their results, the index entries of results that landed (their final
// commits), branches to delete. Without `keep_objects` (a shutdown) the cache
// keeps none of the pushed objects. `streamed` is the agent client's own.
using SaveAllRequest = agent::SaveAll;

// One part per run, per release step and for the lease, as asked; the
// index commit's when entries went.
using SaveAllResult = agent::SavedAll;

// A shutdown's save_all() whose runs come one at a time: the store connects
// as it is opened, while the children flush, and takes each run's snapshot
// as it is added; push() sends them all, with the lease's step, over that
// connection. Like a shutdown's save_all(), it keeps no objects in the cache.
class SaveStream {
 public:
  virtual ~SaveStream() = default;
  virtual void add(const CheckpointRequest& run) = 0;
  // `request.runs` is ignored: the runs added are answered, in order.
  virtual void push(const SaveAllRequest& request, std::function<void(SaveAllResult)> done) = 0;
};

// A run taken over from the store, materialised into its run dir.
struct RestoredRun {
  std::filesystem::path dir;
  checkpoint::RunParams params;
  std::string branch;
  std::string claim;  // the claim commit, when the run came through the store
};

// What a restore asks the store for.
struct RestoreQuery {
  std::vector<RestoredRun> local;   // resumable run dirs on this disk
  std::optional<std::string> only;  // that one run id or branch (`inflight resume`)
  std::set<std::string> skip;       // run ids this instance holds already
  // This pod's lease, taken or renewed before anything is claimed (serve).
  std::optional<SystemClock::time_point> lease_until;
  // This instance runs runs: handed-over runs are left to an idle instance
  // for a while (checkpoint::RestoreRequest::leave_handovers).
  bool leave_handovers = false;
  // Run ids of finished run dirs on this disk (checkpoint::RestoreRequest::finished).
  std::vector<std::string> finished = {};
  // Records watched unchanged for their term, and --take-over
  // (checkpoint::RestoreRequest::expired, take_over).
  std::map<std::string, std::string> expired = {};
  bool take_over = false;
};

// What start-up restore found.
struct RestoreResult {
  std::vector<RestoredRun> runs;
  std::vector<checkpoint::HeldRun> held;  // this instance cannot run them
  // Set when the store could not be asked: local runs only. Failure::auth:
  // the results repo refused our credentials, a configuration error that no
  // retry will fix; Failure::cache: this disk cannot hold a checkpoint.
  std::optional<Error> failure;
  std::vector<std::string> ambiguous;  // with `only`: the branches it names, when several
  // Runs other instances hold (live pods, lost claims): worth a later look.
  std::vector<checkpoint::LeftRun> left;
  // What held runs back, to watch until the next look.
  std::vector<checkpoint::WatchedRecord> watched = {};
  // Every run id with a result ref; set only when the store answered.
  std::optional<std::vector<checkpoint::PublishedRun>> published = std::nullopt;
  // `published` holds the runs with a result ref only (layout 2's log unread): any other run id
  // is published when look_up() says so.
  bool published_partial = false;
  std::size_t claims_lost = 0;  // claims another instance won
  // Why each pack the restore downloaded went to libgit2's indexer, not ours.
  std::vector<std::string> indexed_by_libgit2 = {};
  // A branch copy this disk could not write: the disk, not the branch, failed.
  std::optional<std::string> disk_failure = std::nullopt;
};

class CheckpointPort {
 public:
  virtual ~CheckpointPort() = default;

  virtual void save(const CheckpointRequest& request, SteadyClock::time_point deadline,
                    std::function<void(CheckpointResult)> done) = 0;
  // save() of many runs, and the lease's renewal, over one connection.
  virtual void save_all(const SaveAllRequest& request, SteadyClock::time_point deadline,
                        std::function<void(SaveAllResult)> done) = 0;
  // A save_all() whose runs are added to the stream returned.
  virtual std::unique_ptr<SaveStream> open_save_all(SteadyClock::time_point deadline) = 0;
  // The runs are over: their final states are pushed first (so that no
  // restore runs them again, even when the deletion fails or never happens),
  // then published, then their branches are deleted, each step one push for
  // all. Each run's answer is its own, in order: landed means all happened;
  // Failure::rejected, that another instance owns the branch (or published
  // the run first) and it was left alone.
  virtual void release(const std::vector<CheckpointRequest>& requests,
                       SteadyClock::time_point deadline,
                       std::function<void(std::vector<CheckpointResult>)> done) = 0;
  // Whether this disk can hold a checkpoint now: landed when it can,
  // Failure::cache when it cannot.
  virtual void check(SteadyClock::time_point deadline,
                     std::function<void(CheckpointResult)> done) = 0;
  // Claims and materialises the runs the store holds that this instance's
  // templates accept; `query.local` are the resumable runs found on local
  // disk, for the local-versus-branch rule.
  virtual void restore(const RestoreQuery& query, SteadyClock::time_point deadline,
                       std::function<void(RestoreResult)> done) = 0;
  // Takes or renews this pod's lease (lease.hpp) until `until`.
  virtual void hold_lease(SystemClock::time_point until, SteadyClock::time_point deadline,
                          std::function<void(CheckpointResult)> done) = 0;
  // Gives this pod's lease up: every run it held was handed over.
  virtual void drop_lease(SteadyClock::time_point deadline,
                          std::function<void(CheckpointResult)> done) = 0;
  // Whether each run id (at most checkpoint::CheckpointStore::kMaxLookedUp) is published, in
  // order: what a restore with `published_partial` left to ask.
  virtual void look_up(const std::vector<std::string>& run_ids, SteadyClock::time_point deadline,
                       std::function<void(Result<std::vector<checkpoint::LookedUpRun>>)> done) = 0;
};

}  // namespace inflight
