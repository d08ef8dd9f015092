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

// A look-up's answer travels as "yes", "no" or "unknown"; a word this release does not know is
// `unknown`, which never starts a run.
inline void to_json(OrderedJson& j, LookedUpRun::Answer answer) {
  using Answer = LookedUpRun::Answer;
  j = answer == Answer::yes ? "yes" : answer == Answer::no ? "no" : "unknown";
}
inline void from_json(const OrderedJson& j, LookedUpRun::Answer& answer) {
  const auto word = j.get<std::string>();
  using Answer = LookedUpRun::Answer;
  answer = word == "yes" ? Answer::yes : word == "no" ? Answer::no : Answer::unknown;
}
}  // namespace inflight::checkpoint

namespace inflight {

using OrderedJson = nlohmann::ordered_json;

inline constexpr int kAgentProtocolVersion = 15;

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
  // The longest deadline an agent of this cache gets, with a margin: older temp files in the
  // cache are of killed agents (StoreConfig::sweep_temp_after).
  std::int64_t sweep_temp_after_seconds = 0;
  std::int64_t results_ref_retention_seconds = 600;  // StoreConfig::results_ref_retention
  std::int64_t results_layout = 2;                   // StoreConfig::results_layout
};
INFLIGHT_AGENT_MESSAGE(AgentStore, cache_dir, url, username, token, ssh_key, known_hosts, ca_file,
                       excludes, restore_max_bytes, restore_max_files, claim_lease_seconds, publish,
                       sweep_temp_after_seconds, results_ref_retention_seconds, results_layout)

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

// One step's answer, and one part of a batched step's: landed, or its own
// failure. On the wire {"failure":null|{…},"commit":…,"left_out":…}.
using StepResult = Result<Saved>;

}  // namespace agent
}  // namespace inflight

namespace nlohmann {

template <>
struct adl_serializer<inflight::agent::StepResult> {
  template <class Json>
  static void to_json(Json& j, const inflight::agent::StepResult& step) {
    j = Json::object();
    j["failure"] = step ? Json(nullptr) : Json(step.error());
    j["commit"] = step ? Json(step->commit) : Json(nullptr);
    j["left_out"] = step ? step->left_out : inflight::checkpoint::LeftOut{};
  }
  template <class Json>
  static inflight::agent::StepResult from_json(const Json& j) {
    auto saved = inflight::agent::Saved{
        .commit = j.at("commit").template get<std::optional<std::string>>(),
        .left_out = j.at("left_out").template get<inflight::checkpoint::LeftOut>()};
    if (!j.at("failure").is_null()) return j.at("failure").template get<inflight::Error>();
    return saved;
  }
};

}  // namespace nlohmann

namespace inflight {
namespace agent {

struct Save {
  static constexpr std::string_view op = "save";
  using Answer = Saved;
  RunCheckpoint run;
};
INFLIGHT_AGENT_MESSAGE(Save, run)

struct Released {
  std::vector<StepResult> runs;  // one per run asked for, in order
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
  std::vector<StepResult> runs;     // one per run asked for, in order
  std::optional<StepResult> lease;  // set when the lease was asked for
  // The release steps' (SaveAll::finals, indexed, deletions): a final's
  // commit is its final checkpoint, none when there was nothing to publish.
  std::vector<StepResult> finals = {};
  std::optional<StepResult> index = std::nullopt;  // set when entries went (finals, indexed)
  std::vector<StepResult> deletions = {};
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
  std::vector<std::string> indexed_by_libgit2;
  std::optional<std::string> disk_failure;
  // `published` lists the runs with a result ref only (layout 2, the log unread): ask LookUp.
  bool published_partial = false;
};
INFLIGHT_AGENT_MESSAGE(Restored, claimed, left, held, lost, released, ambiguous, problems,
                       published, watched, indexed_by_libgit2, disk_failure, published_partial)

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

// One run id asked about: "yes", "no", or "unknown" (the archive cannot be asked), with the
// index file's text of a published run when known (read again by the caller).
struct LookedUp {
  std::string run_id;
  checkpoint::LookedUpRun::Answer published = checkpoint::LookedUpRun::Answer::unknown;
  std::optional<std::string> entry;
};
INFLIGHT_AGENT_MESSAGE(LookedUp, run_id, published, entry)

struct LookedUpRuns {
  std::vector<LookedUp> runs;  // one per run id asked, in order
};
INFLIGHT_AGENT_MESSAGE(LookedUpRuns, runs)

// Whether each run id is published (CheckpointStore::look_up): at most 64.
struct LookUp {
  static constexpr std::string_view op = "look_up";
  using Answer = LookedUpRuns;
  std::vector<std::string> run_ids;
};
INFLIGHT_AGENT_MESSAGE(LookUp, run_ids)

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
