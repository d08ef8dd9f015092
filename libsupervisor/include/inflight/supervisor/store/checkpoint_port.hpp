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

#include "inflight/checkpoint/store_types.hpp"
#include "inflight/core/clock.hpp"
#include "inflight/core/failure.hpp"
#include "inflight/core/run_params.hpp"

namespace inflight {

struct CheckpointRequest {
  std::string run_id;
  std::filesystem::path run_dir;
  std::string origin_pod;
  int attempt = 0;
  checkpoint::CheckpointReason reason = checkpoint::CheckpointReason::manual;
  std::uint64_t records = 0;
  std::optional<std::uint64_t> total = std::nullopt;  // records when done, when known
};

// A step that landed.
struct Landed {
  std::optional<std::string> commit;  // none when nothing changed
  checkpoint::LeftOut left_out;       // a run's checkpoint: what it left out
};

// A store step: landed, or why not. Failure::rejected: another instance owns
// the run, stop touching it; Failure::cache: this disk's cache repo cannot be
// opened or written; Failure::over_limit: the run dir holds more than a
// restore takes, even with what a restore refuses left out.
using CheckpointResult = Result<Landed>;

// One store step for many runs: a shutdown, a periodic tick.
struct SaveAllRequest {
  std::vector<CheckpointRequest> runs;
  std::optional<SystemClock::time_point> lease_until;  // this pod's lease, renewed in the push
  // … or released in it (the last push of a shutdown), when every run is
  // saved; `lease_until` is then how long to take it again should the
  // server refuse a run (store_types.hpp's LeaseStep).
  bool release_lease = false;
  // Whether the cache keeps the pushed objects for the next save; a
  // shutdown's push does not need them (the next start fetches what it lacks).
  bool keep_objects = true;
  // Finished runs' release steps in the same push (checkpoint::ReleaseSteps):
  // final states with their results, the index entries of results that
  // landed (their final commits), branches to delete.
  std::vector<CheckpointRequest> finals = {};
  std::vector<std::string> indexed = {};
  std::vector<CheckpointRequest> deletions = {};
};

struct SaveAllResult {
  std::vector<CheckpointResult> runs;     // one per request, in order
  std::optional<CheckpointResult> lease;  // when the lease was asked for: landed once renewed
                                          // (or released)
  // One per final (landed: its final commit, none when there was nothing to
  // publish), the index commit's when entries went (with finals or indexed),
  // one per deletion.
  std::vector<CheckpointResult> finals = {};
  std::optional<CheckpointResult> index = std::nullopt;
  std::vector<CheckpointResult> deletions = {};
};

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
  std::size_t claims_lost = 0;  // claims another instance won
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
};

}  // namespace inflight
