// The values the checkpoint store takes and gives: what crosses from the
// supervisor to the store (through the agent) and back. No libgit2 here, so
// that the supervisor, which reaches the store only through its port, can
// name them without reaching git.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "inflight/checkpoint/commit_message.hpp"
#include "inflight/checkpoint/index_entry.hpp"
#include "inflight/checkpoint/lease_record.hpp"
#include "inflight/checkpoint/tree_rules.hpp"
#include "inflight/core/child_templates.hpp"
#include "inflight/core/failure.hpp"
#include "inflight/core/run_params.hpp"

namespace inflight::checkpoint {

class PushSources;  // libcheckpoint/src/remote/push_sources.hpp

// A libgit2 failure inside the store, classified as the one Failure list
// (failure.hpp). Thrown only within the store's git layer: every public call
// the agent makes returns its expected outcomes as values.
class GitError : public std::runtime_error {
 public:
  GitError(Failure kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Failure kind() const { return kind_; }
  // A failure of the connection itself, not of one ref: every ref's.
  bool network() const { return network_failure(kind_); }
  Error error() const { return {.kind = kind_, .message = what(), .candidates = {}}; }

 private:
  Failure kind_;
};

struct RemoteConfig {
  std::string url;
  std::string username;
  std::string token;  // secret: never in a message
  std::filesystem::path ssh_key;
  std::filesystem::path ssh_known_hosts;
  std::filesystem::path ca_file;
};

struct RemoteBranch {
  std::string ref;  // refs/heads/inflight/<pod>/<run-id>
  std::string oid;  // hex
};

struct CommitSummary {
  std::string oid;
  std::int64_t time = 0;  // seconds since the epoch
  std::string message;    // the whole message, trailers included
};

// The results-repo URL as messages may show it: without any password.
std::string display_url(const std::string& url);

// One ref of a batch: moved to `commit`, fast-forward only.
struct RefUpdate {
  std::string ref;
  std::string commit;  // empty: delete the ref
  // The tip the update was judged on; a ref that moved or went since is
  // taken; empty: no ref, so that the update only creates one. Without it, a
  // fast-forward of whatever tip there is.
  std::optional<std::string> from;
  // A run branch's result ref, for a branch this cache pushed before: with
  // that ref there, the branch gone means the pod that took and finished the
  // run released it. Taken, never created again by a pod that was paused or
  // cut off meanwhile.
  std::optional<std::string> result = std::nullopt;
  // Instead of `commit`: the commit to send, built once the server advertised the ref's tip
  // (passed as hex; empty: no ref) and on it, as layout 2's archive and index log grow. It is
  // written, with what it brings, into the push's own objects (push_sources.hpp), never into the
  // cache: its parent, the server's tip, need not be there, and a stub stands in for it. Not
  // judged as a fast-forward, which it is by construction; `from` still applies. Not remembered
  // as a pushed tip: the next build takes the tip the server advertises then.
  std::function<std::string(const std::string& tip, PushSources& objects)> build = nullptr;
};

enum class RefOutcome {
  updated,  // the ref is at the commit now
  // its tip, as listed, is not an ancestor of the commit or not the tip the
  // update was judged on: another instance moved it
  taken,
  refused,  // the server refused it by a rule of its own (a hook, a permission, a quota)
  // It could not be written (a lock another push held or left behind, a full
  // disk) and the tips listed again did not show it moved: nobody judged the
  // update, so the run is still this pod's.
  unwritten,
};

// Whether the update was judged against this pod (its tip moved: another
// instance wrote it): the pod stops writing the run's branch. A refusal by
// the server's rules is not: the run stays this pod's, its push to retry.
constexpr bool judged_against(RefOutcome outcome) {
  return outcome == RefOutcome::taken;
}

// The failure of a ref that was not updated.
constexpr Failure failure_of(RefOutcome outcome) {
  switch (outcome) {
    case RefOutcome::taken:
      return Failure::rejected;
    case RefOutcome::refused:
      return Failure::refused;
    case RefOutcome::updated:
    case RefOutcome::unwritten:
      break;
  }
  return Failure::other;
}

struct RefResult {
  RefOutcome outcome = RefOutcome::updated;
  std::string detail;  // why, when not updated
};

// How long a claim by a pod without a lease (`inflight resume`) holds the
// claimed branch: twice --git-timeout (docs/checkpoints.md "Leases and clocks"). The one
// rule for StoreConfig::claim_lease.
constexpr std::chrono::seconds claim_lease_for(std::chrono::milliseconds network_timeout) {
  return 2 * std::chrono::duration_cast<std::chrono::seconds>(network_timeout);
}

struct StoreConfig {
  std::filesystem::path cache_dir;  // the local cache repo
  RemoteConfig remote;
  std::vector<std::string> exclude_globs;
  TreeLimits restore_limits;
  // A branch whose tip is a claim younger than this, by a pod without a
  // lease (`inflight resume`), is that pod's: it is running the run now.
  // claim_lease_for(the network timeout).
  std::chrono::seconds claim_lease{};
  // A finished run is published (docs/results.md)
  // before its branch is deleted.
  bool publish = true;
  // Temp files in the cache older than this are of agents killed at their
  // deadline, and go when the store opens (cache_sweep.hpp); zero keeps them.
  std::chrono::seconds sweep_temp_after{};
  // Layout 2: how long a result ref stays once this pod's fold put its result in the archive
  // (docs/results.md "The history layout"); then a push of this pod deletes it.
  std::chrono::seconds results_ref_retention{600};
  // The layout a results repo with no index gets at its first publish (docs/results.md "The
  // history layout"): 2, the log and the archive; 1, layout 1's inflight-index, and no result ref
  // deleted by this pod, for pods of earlier releases. A repo keeps the layout it has.
  int results_layout = 2;
};

struct ClaimedRun {
  RunParams params;
  std::filesystem::path dir;
  std::string branch;  // refs/heads/inflight/…
  std::string claim;   // the claim commit, the branch's tip now
};

// A run found resumable on local disk, for the local-versus-branch rule.
struct LocalRun {
  std::size_t attempts = 0;
  std::string origin_pod;
};

// What the instance makes of a run before anything is claimed or written
// (its templates, in core): restore asks through a judge.
using RunVerdict = inflight::RunVerdict;
using RunJudge = std::function<RunVerdict(const RunParams&)>;

struct RestoreRequest {
  std::filesystem::path runs_dir;
  std::string pod;                        // this instance
  std::map<std::string, LocalRun> local;  // by run id
  RunJudge judge;
  // A run id or branch: restore only that run, push no local run.
  std::optional<std::string> only;
  // This pod's lease to take or renew, in the push of the claims (serve).
  std::optional<std::int64_t> lease_until;
  // Run ids this instance holds already: a later look at the store must not
  // take its own runs a second time.
  std::set<std::string> skip;
  // This instance runs runs already: a run another pod handed over (a
  // shutdown checkpoint) less than claim_lease ago is left for an idle
  // instance, such as the new pod of a rolling deploy, so that the run moves
  // once and not to a pod that is about to stop too.
  bool leave_handovers = false;
  // Records (`ref` -> oid) the caller has watched unchanged for their whole
  // term by its own monotonic clock (docs/checkpoints.md "Leases and clocks"): a lease, a claim or
  // a handover among them no longer holds its runs. No wall clock decides that.
  std::map<std::string, std::string> expired = {};
  // A one-shot command's --take-over: no lease or claim holds a run.
  bool take_over = false;
  // Run ids of finished run dirs on this disk: one with neither a branch nor
  // a result, that this cache never published, is published (its release
  // came from a release of inflight before publishing, or --publish off).
  std::vector<std::string> finished = {};
};

// A record that holds runs while it stays unchanged: another pod's lease, or
// a branch tip that is a claim or a handover. The caller watches it for
// `term` seconds by its own clock; `written` (the writer's clock) is shown
// and compared with the caller's, never used to decide.
struct WatchedRecord {
  std::string ref;
  std::string oid;
  std::int64_t term = 0;
  std::int64_t written = 0;
  std::string pod;
};

// A run this instance cannot run: its branch is left as it is.
struct HeldRun {
  RunParams params;
  std::string branch;  // refs/heads/inflight/…, empty for a local run
  std::string reason;
};

// A run that another pod answers for now: left to it until `until`.
struct LeftRun {
  std::string run_id;
  std::string pod;
  std::int64_t until = 0;  // seconds since the epoch
};

// A run with a result ref: finished, never run again. Its index entry when
// the index holds a good one.
struct PublishedRun {
  std::string run_id;
  std::optional<IndexEntry> entry;
};

// A run id asked about (CheckpointStore::look_up): published or not, and its entry when known.
// `unknown`: the archive cannot be asked (a server that serves no marker by id).
struct LookedUpRun {
  enum class Answer { no, yes, unknown };
  std::string run_id;
  Answer answer = Answer::no;
  std::optional<IndexEntry> entry = std::nullopt;
};

struct RestoreReport {
  std::vector<ClaimedRun> claimed;      // ours now, ready to resume
  std::vector<HeldRun> held;            // refused by the judge, left alone
  std::vector<std::string> lost;        // run ids another instance claimed first
  std::vector<LeftRun> left;            // runs of other live pods, to look at again
  std::vector<std::string> released;    // branches of finished runs, deleted
  std::vector<std::string> ambiguous;   // with `only`: every branch it names, when several
  std::vector<std::string> problems;    // one line per branch that could not be used
  std::vector<PublishedRun> published;  // every run id with a result ref or an index entry
  // Layout 2: `published` holds the runs with a result ref only, the log unread; any other run
  // is published when look_up() says so.
  bool published_partial = false;
  std::vector<WatchedRecord> watched;  // what held runs back this time
  // Why each pack this restore downloaded went to libgit2's indexer, not ours.
  std::vector<std::string> indexed_by_libgit2;
  // The first branch copy this disk could not write (before or after its
  // claim landed): the caller's disk health hears of it.
  std::optional<std::string> disk_failure;
};

// One run as `inflight runs list` shows it (run_listing.hpp).
struct RunRow {
  std::string id;
  std::string state;  // live, waiting, succeeded, failed, cancelled
  std::string pod;    // of the last attempt, or the tip's writer
  std::size_t attempts = 0;
  std::size_t interruptions = 0;  // docs/serve.md "The two budgets"
  std::size_t failures = 0;
  std::uint64_t records = 0;
  std::optional<std::uint64_t> total;
  std::optional<std::string> last_checkpoint_at;
  std::optional<std::string> finished_at;
  std::string where;  // its branch (inflight/<pod>/<run-id>) or its result ref
};

// One run of a batched save.
struct SaveRequest {
  std::filesystem::path run_dir;
  std::string origin_pod;
  CheckpointInfo info;
};

struct SaveOutcome {
  std::optional<std::string> commit;  // none when nothing changed
  RefOutcome ref = RefOutcome::updated;
  std::optional<std::string> error;  // this run's own failure (its dir could not be read)
  // The kind of `error` when the snapshot failed (over_limit, other); a ref
  // that was not updated is told by `ref`.
  std::optional<Failure> snapshot_failure;
  LeftOut left_out;  // what the snapshot left out (tree_rules.hpp)
};

// What a batched save does with the pod's lease: renew it until
// `lease.until`, or (the last push of a shutdown) release it. A release
// rides the push only when every run was snapshotted; should the server then
// refuse a run's ref, the lease is taken again until `lease.until`, since
// only this disk holds that run's last state.
struct LeaseStep {
  Lease lease;
  bool release = false;
};

// The steps of finished runs that ride a periodic batched save (docs/results.md): a run's final
// state with its result ref (created only if absent) and its index entry, all in one push; the
// entry alone again when only it did not land; then, in a later push, the deletion of branches
// whose results and entries landed.
struct ReleaseSteps {
  std::vector<SaveRequest> finals = {};
  std::vector<std::string> indexed = {};  // final commits whose results landed
  std::vector<SaveRequest> deletions = {};
};

// What a batched save did: each run's outcome, and the lease's renewal or release.
struct SaveAllReport {
  std::vector<SaveOutcome> runs;
  // Branches someone rewrote to a commit that is no checkpoint of their run
  // (a force-push by hand): not another owner; saved on top of it.
  std::vector<std::string> rewritten;
  std::optional<std::string> lease_error;  // set when the lease was asked for and not renewed
                                           // (or not released)
  // One per ReleaseSteps::finals: its final commit (none: over the restore
  // limits, nothing to publish) once it and its result landed.
  std::vector<Result<std::optional<std::string>>> finals = {};
  std::optional<Result<void>> index = std::nullopt;  // when entries went (finals, indexed)
  std::vector<Result<void>> deletions = {};          // one per ReleaseSteps::deletions
};

}  // namespace inflight::checkpoint
