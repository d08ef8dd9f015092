// The messages between the callers of the checkpoint agent (serve, resume,
// the checkpoints commands) and `inflight-checkpoint-agent`: one request on
// the agent's stdin, one answer on its stdout, each a JSON object. Both sides
// build and read them through the structs below, so a field cannot be spelt
// two ways; the version tells a caller from an agent of another release
// (binaries replaced under a running serve).
//
//   request: {"version":1,"op":"save","store":{…},"pod":"…","call":{…}}
//   answer:  {"version":1,"ok":true,"answer":{…}}
//            {"version":1,"ok":false,"failure":{"kind":"rejected","error":"…","branches":[]}}
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "inflight/checkpoint/checkpoint_reason.hpp"
#include "inflight/checkpoint/store_types.hpp"
#include "inflight/core/bounded_json.hpp"
#include "inflight/core/failure.hpp"
#include "inflight/core/run_params.hpp"

namespace nlohmann {

// nlohmann_json 3.11 has no std::optional: absent is null on the wire.
template <class T>
struct adl_serializer<std::optional<T>> {
  template <class Json>
  static void to_json(Json& j, const std::optional<T>& value) {
    if (value)
      j = *value;
    else
      j = nullptr;
  }
  template <class Json>
  static void from_json(const Json& j, std::optional<T>& value) {
    value = j.is_null() ? std::nullopt : std::optional<T>(j.template get<T>());
  }
};

}  // namespace nlohmann

// NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE for OrderedJson: every field is written,
// and every field must be present when read.
#define INFLIGHT_AGENT_MESSAGE(Type, ...)                                            \
  inline void to_json(OrderedJson& nlohmann_json_j, const Type& nlohmann_json_t) {   \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(NLOHMANN_JSON_TO, __VA_ARGS__))         \
  }                                                                                  \
  inline void from_json(const OrderedJson& nlohmann_json_j, Type& nlohmann_json_t) { \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(NLOHMANN_JSON_FROM, __VA_ARGS__))       \
  }

namespace inflight::checkpoint {
INFLIGHT_AGENT_MESSAGE(LeftRun, run_id, pod, until)
INFLIGHT_AGENT_MESSAGE(WatchedRecord, ref, oid, term, written, pod)
INFLIGHT_AGENT_MESSAGE(LeftOutEntry, path, rule)
INFLIGHT_AGENT_MESSAGE(LeftOut, named, unnamed)
INFLIGHT_AGENT_MESSAGE(RunRow, id, state, pod, attempts, interruptions, failures, records, total,
                       last_checkpoint_at, finished_at, where)

// A reason travels as the word its commit's subject carries.
inline void to_json(OrderedJson& j, CheckpointReason reason) {
  j = to_string(reason);
}
inline void from_json(const OrderedJson& j, CheckpointReason& reason) {
  const auto parsed = parse_checkpoint_reason(j.get<std::string>());
  if (!parsed) throw std::runtime_error("unknown checkpoint reason '" + j.get<std::string>() + "'");
  reason = *parsed;
}
}  // namespace inflight::checkpoint

namespace inflight {

using OrderedJson = nlohmann::ordered_json;

inline constexpr int kAgentProtocolVersion = 8;

// Either side's message: a restore answer carries the run-params of every
// run it holds back, each at most 1 MiB.
inline constexpr JsonLimits kAgentMessageLimits{.max_bytes = 256u << 20, .max_depth = 64};

// A failure travels as its word in failure.hpp's table; a word this release
// does not know is `other`, which every caller handles.
inline void to_json(OrderedJson& j, Failure failure) {
  j = to_string(failure);
}
inline void from_json(const OrderedJson& j, Failure& failure) {
  failure = parse_failure(j.get<std::string>()).value_or(Failure::other);
}

// A failed step on the wire: {"kind":…,"error":…,"branches":[…]}, where
// `branches` are an ambiguous run id's candidates.
inline void to_json(OrderedJson& j, const Error& error) {
  j = {{"kind", error.kind}, {"error", error.message}, {"branches", error.candidates}};
}
inline void from_json(const OrderedJson& j, Error& error) {
  j.at("kind").get_to(error.kind);
  j.at("error").get_to(error.message);
  j.at("branches").get_to(error.candidates);
}

// How the agent reaches the results repo and its cache; the same for every
// call of one instance. Holds the token: never logged.
struct AgentStore {
  std::string cache_dir;
  std::string url;
  std::string username;
  std::string token;
  std::string ssh_key;
  std::string known_hosts;
  std::string ca_file;
  std::vector<std::string> excludes;
  std::uint64_t restore_max_bytes = 0;
  std::uint64_t restore_max_files = 0;
  std::int64_t claim_lease_seconds = 0;
  bool publish = true;
};
INFLIGHT_AGENT_MESSAGE(AgentStore, cache_dir, url, username, token, ssh_key, known_hosts, ca_file,
                       excludes, restore_max_bytes, restore_max_files, claim_lease_seconds, publish)

namespace agent {

// The answer of a step that returns nothing but success.
struct Done {};
inline void to_json(OrderedJson& j, const Done&) {
  j = OrderedJson::object();
}
inline void from_json(const OrderedJson&, Done&) {}

// Whether this disk can hold a checkpoint now.
struct Check {
  static constexpr std::string_view op = "check";
  using Answer = Done;
};
inline void to_json(OrderedJson& j, const Check&) {
  j = OrderedJson::object();
}
inline void from_json(const OrderedJson&, Check&) {}

// One run's checkpoint, as a save, a release and a batched save name it.
struct RunCheckpoint {
  std::string run_dir;  // absolute
  std::string origin_pod;
  std::string run_id;
  int attempt = 0;
  checkpoint::CheckpointReason reason = checkpoint::CheckpointReason::manual;
  std::uint64_t records = 0;
  std::optional<std::uint64_t> total = std::nullopt;  // records when done, when the template says
};
INFLIGHT_AGENT_MESSAGE(RunCheckpoint, run_dir, origin_pod, run_id, attempt, reason, records, total)

struct Saved {
  std::optional<std::string> commit;  // none when nothing changed
  checkpoint::LeftOut left_out;       // what the snapshot left out, for serve's warnings
};
INFLIGHT_AGENT_MESSAGE(Saved, commit, left_out)

struct Save {
  static constexpr std::string_view op = "save";
  using Answer = Saved;
  RunCheckpoint run;
};
INFLIGHT_AGENT_MESSAGE(Save, run)

// One part of a batched step: its own success or failure.
struct PartResult {
  std::optional<Error> failure;
  std::optional<std::string> commit;
  checkpoint::LeftOut left_out;  // a run's: what its snapshot left out
};
INFLIGHT_AGENT_MESSAGE(PartResult, failure, commit, left_out)

struct Released {
  std::vector<PartResult> runs;  // one per run asked for, in order
};
INFLIGHT_AGENT_MESSAGE(Released, runs)

// The runs are over: their final states, their results, then the deletion
// of their branches, each step one push for all.
struct Release {
  static constexpr std::string_view op = "release";
  using Answer = Released;
  std::vector<RunCheckpoint> runs;
};
INFLIGHT_AGENT_MESSAGE(Release, runs)

struct SavedAll {
  std::vector<PartResult> runs;     // one per run asked for, in order
  std::optional<PartResult> lease;  // set when the lease was asked for
  // The release steps' (SaveAll::finals, indexed, deletions): a final's
  // commit is its final checkpoint, none when there was nothing to publish.
  std::vector<PartResult> finals = {};
  std::optional<PartResult> index = std::nullopt;  // set when entries went (finals, indexed)
  std::vector<PartResult> deletions = {};
};
INFLIGHT_AGENT_MESSAGE(SavedAll, runs, lease, finals, index, deletions)

// Every run in one push, with the lease's renewal when `lease_until` is set,
// or its release (checkpoint_store.hpp's LeaseStep) with `release_lease`.
// Without `keep_objects` (a shutdown) the cache does not write the new
// objects to disk: the push is the only place they are compressed.
//
// With `streamed` (a shutdown), the runs and the lease step follow the
// request, one SaveAllPart per line: the agent connects while the children
// flush and takes each run's snapshot as soon as it comes; the part marked
// `last` ends the call with one push. The answer lists the runs in the order
// they came.
struct SaveAll {
  static constexpr std::string_view op = "save_all";
  using Answer = SavedAll;
  std::vector<RunCheckpoint> runs;
  std::optional<std::int64_t> lease_until;  // seconds since the epoch
  bool release_lease = false;
  bool keep_objects = true;
  bool streamed = false;
  // Finished runs' release steps in the same push (store_types.hpp's
  // ReleaseSteps): final states with their results, the index entries of
  // results that landed (their final commits), branches to delete.
  std::vector<RunCheckpoint> finals = {};
  std::vector<std::string> indexed = {};
  std::vector<RunCheckpoint> deletions = {};
};
INFLIGHT_AGENT_MESSAGE(SaveAll, runs, lease_until, release_lease, keep_objects, streamed, finals,
                       indexed, deletions)

struct SaveAllPart {
  std::optional<RunCheckpoint> run = std::nullopt;
  bool last = false;                        // with the lease step below
  std::optional<std::int64_t> lease_until;  // seconds since the epoch
  bool release_lease = false;
};
INFLIGHT_AGENT_MESSAGE(SaveAllPart, run, last, lease_until, release_lease)

struct HoldLease {
  static constexpr std::string_view op = "lease";
  using Answer = Done;
  std::int64_t until = 0;  // seconds since the epoch
};
INFLIGHT_AGENT_MESSAGE(HoldLease, until)

struct DropLease {
  static constexpr std::string_view op = "unlease";
  using Answer = Done;
};
inline void to_json(OrderedJson& j, const DropLease&) {
  j = OrderedJson::object();
}
inline void from_json(const OrderedJson&, DropLease&) {}

struct LocalRun {
  std::string run_id;
  std::size_t attempts = 0;
  std::string origin_pod;
};
INFLIGHT_AGENT_MESSAGE(LocalRun, run_id, attempts, origin_pod)

struct ClaimedRun {
  std::string run_id;
  std::string dir;
  std::string branch;  // refs/heads/inflight/…
  std::string claim;
};
INFLIGHT_AGENT_MESSAGE(ClaimedRun, run_id, dir, branch, claim)

// run-params.json as the agent read it: validated again by the caller, one
// run at a time, so that one bad run spoils only itself.
struct HeldRun {
  OrderedJson params;
  std::string branch;
  std::string reason;
};
INFLIGHT_AGENT_MESSAGE(HeldRun, params, branch, reason)

// A run id with a result ref, and its index file's text when the index
// holds a good one (read again by the caller).
struct Published {
  std::string run_id;
  std::optional<std::string> entry;
};
INFLIGHT_AGENT_MESSAGE(Published, run_id, entry)

struct Restored {
  std::vector<ClaimedRun> claimed;
  std::vector<checkpoint::LeftRun> left;
  std::vector<HeldRun> held;
  std::vector<std::string> lost;
  std::vector<std::string> released;
  std::vector<std::string> ambiguous;
  std::vector<std::string> problems;
  std::vector<Published> published;
  std::vector<checkpoint::WatchedRecord> watched;
};
INFLIGHT_AGENT_MESSAGE(Restored, claimed, left, held, lost, released, ambiguous, problems,
                       published, watched)

struct Restore {
  static constexpr std::string_view op = "restore";
  using Answer = Restored;
  std::string runs_dir;
  std::vector<LocalRun> local;
  std::vector<std::string> skip;
  OrderedJson children;  // the instance's templates, to judge branches before claiming them
  std::optional<std::string> only;
  std::optional<std::int64_t> lease_until;
  bool leave_handovers = false;
  std::vector<std::string> finished;           // run ids of finished run dirs, to publish if never
  std::map<std::string, std::string> expired;  // ref -> oid, watched unchanged for their term
  bool take_over = false;
};
INFLIGHT_AGENT_MESSAGE(Restore, runs_dir, local, skip, children, only, lease_until, leave_handovers,
                       finished, expired, take_over)

// What a restore by this instance would do with a branch: its STATE in
// `checkpoints list`, spelt by one table on the wire and in the output.
enum class BranchState {
  resumable,  // resume it
  finished,   // the run is over: delete the branch
  held,       // no template here runs it (or its request no longer validates)
  refused,    // its run-params.json cannot be read
};

inline constexpr WordTable<BranchState, 4> kBranchStates{{
    {BranchState::resumable, "resumable"},
    {BranchState::finished, "finished"},
    {BranchState::held, "held"},
    {BranchState::refused, "refused"},
}};

constexpr std::string_view to_string(BranchState state) {
  return word_of(kBranchStates, state);
}

inline void to_json(OrderedJson& j, BranchState state) {
  j = to_string(state);
}
inline void from_json(const OrderedJson& j, BranchState& state) {
  const auto word = j.get<std::string>();
  const auto parsed = value_of(kBranchStates, word);
  if (!parsed) throw std::runtime_error("unknown branch state '" + word + "'");
  state = *parsed;
}

// A checkpoint branch as `checkpoints list` and `show` describe it.
struct BranchInfo {
  std::string run_id;
  std::string origin_pod;
  std::string branch;  // inflight/<pod>/<run-id>
  std::size_t attempts = 0;
  std::int64_t time = 0;  // of the tip, seconds since the epoch
  std::uint64_t records = 0;
  std::uint64_t size_bytes = 0;
  BranchState state = BranchState::resumable;
  std::optional<std::string> reason;  // why it is held or refused
};
INFLIGHT_AGENT_MESSAGE(BranchInfo, run_id, origin_pod, branch, attempts, time, records, size_bytes,
                       state, reason)

struct Listed {
  std::string url;
  std::vector<BranchInfo> checkpoints;
  std::vector<std::string> problems;
};
INFLIGHT_AGENT_MESSAGE(Listed, url, checkpoints, problems)

struct List {
  static constexpr std::string_view op = "list";
  using Answer = Listed;
  std::optional<std::string> pod;
  OrderedJson children;
};
INFLIGHT_AGENT_MESSAGE(List, pod, children)

struct HistoryEntry {
  std::string oid;
  std::int64_t time = 0;
  std::string reason;  // checkpoint_reason.hpp's word; empty when the message has none
  int attempt = 0;
  std::string pod;
  std::uint64_t records = 0;
};
INFLIGHT_AGENT_MESSAGE(HistoryEntry, oid, time, reason, attempt, pod, records)

struct Shown {
  BranchInfo branch;
  std::string tip;
  std::vector<HistoryEntry> history;  // newest first
  OrderedJson run_params;             // null when missing or not JSON
};
INFLIGHT_AGENT_MESSAGE(Shown, branch, tip, history, run_params)

// Fails `ambiguous` when several pods hold a branch of that run id.
struct Show {
  static constexpr std::string_view op = "show";
  using Answer = Shown;
  std::string run_id;  // or a branch name
};
INFLIGHT_AGENT_MESSAGE(Show, run_id)

struct PruneFailure {
  std::string branch;
  Error failure;
};
INFLIGHT_AGENT_MESSAGE(PruneFailure, branch, failure)

struct Pruned {
  std::string url;
  std::vector<std::string> deleted;  // or, with dry_run, would be
  std::vector<PruneFailure> failed;
  std::vector<std::string> missing;  // run ids without a branch
  std::vector<std::string> problems;
  std::vector<std::string> published;  // finished runs published before their branch went
};
INFLIGHT_AGENT_MESSAGE(Pruned, url, deleted, failed, missing, problems, published)

// Exactly one selector is meant to be set. A finished run's branch is
// published before it goes; one that cannot be is kept, unless `force`. A
// branch whose tip's pod holds a lease is live and kept, unless `take_over`.
struct Prune {
  static constexpr std::string_view op = "prune";
  using Answer = Pruned;
  std::optional<std::int64_t> older_than_seconds;
  std::vector<std::string> run_ids;
  bool all = false;
  bool dry_run = false;
  bool force = false;
  bool take_over = false;
};
INFLIGHT_AGENT_MESSAGE(Prune, older_than_seconds, run_ids, all, dry_run, force, take_over)

// `inflight runs list` (docs/results.md "Every run of the fleet: `inflight runs`").
struct RunsListed {
  std::string url;
  std::vector<checkpoint::RunRow> runs;
  std::vector<std::string> problems;
};
INFLIGHT_AGENT_MESSAGE(RunsListed, url, runs, problems)

struct ListRuns {
  static constexpr std::string_view op = "list_runs";
  using Answer = RunsListed;
};
inline void to_json(OrderedJson& j, const ListRuns&) {
  j = OrderedJson::object();
}
inline void from_json(const OrderedJson&, ListRuns&) {}

// `inflight runs show` and `inflight runs logs`: the run's data, from its
// result when published, else from its one branch.
struct RunShown {
  std::string where;       // the result ref or the branch
  OrderedJson run_params;  // null when missing or not JSON
};
INFLIGHT_AGENT_MESSAGE(RunShown, where, run_params)

// Fails `not_found` for a run id the results repo does not know, `ambiguous`
// when several pods hold a branch of it.
struct ShowRun {
  static constexpr std::string_view op = "show_run";
  using Answer = RunShown;
  std::string run_id;
};
INFLIGHT_AGENT_MESSAGE(ShowRun, run_id)

// The run's console.log written to `path` (a file the caller made): a log
// is any bytes, which a JSON answer cannot carry.
struct RunLogWritten {
  std::string where;
  bool found = false;  // false: the run has no console.log
};
INFLIGHT_AGENT_MESSAGE(RunLogWritten, where, found)

struct WriteRunLog {
  static constexpr std::string_view op = "run_log";
  using Answer = RunLogWritten;
  std::string run_id;
  std::string path;
};
INFLIGHT_AGENT_MESSAGE(WriteRunLog, run_id, path)

struct RunsPruned {
  std::string url;
  std::vector<std::string> deleted;  // or, with dry_run, would be
  std::vector<std::string> missing;  // named, but not published
  std::vector<std::string> problems;
  std::vector<std::string> failed;  // refs the server did not update
};
INFLIGHT_AGENT_MESSAGE(RunsPruned, url, deleted, missing, problems, failed)

// Exactly one selector is meant to be set.
struct PruneRuns {
  static constexpr std::string_view op = "prune_runs";
  using Answer = RunsPruned;
  std::optional<std::int64_t> older_than_seconds;
  std::vector<std::string> run_ids;
  bool dry_run = false;
};
INFLIGHT_AGENT_MESSAGE(PruneRuns, older_than_seconds, run_ids, dry_run)

}  // namespace agent

// The envelope of every request.
struct AgentRequest {
  int version = kAgentProtocolVersion;
  std::string op;
  AgentStore store;
  std::string pod;   // the instance asking: its commits and its lease
  OrderedJson call;  // the op's struct
};
INFLIGHT_AGENT_MESSAGE(AgentRequest, version, op, store, pod, call)

// An answer as the caller gets it: the answer's struct, or why there is none.
template <class Answer>
using AgentReply = Result<Answer>;

// The answer line the agent writes.
OrderedJson answer_message(const OrderedJson& answer);
OrderedJson failure_message(const Error& failure);

// The agent's output: the answer's JSON, or the failure it carries. A
// missing, malformed or other-version answer is a failure of kind `other`
// that says so.
Result<OrderedJson> read_output(std::string_view output);

// read_output() with the answer read into its struct.
template <class Answer>
AgentReply<Answer> read_reply(const Result<OrderedJson>& out) {
  if (!out) return out.error();
  try {
    return out->get<Answer>();
  } catch (const std::exception& e) {
    return Error{.kind = Failure::other,
                 .message = std::string("the checkpoint agent's answer is malformed: ") + e.what(),
                 .candidates = {}};
  }
}

}  // namespace inflight
