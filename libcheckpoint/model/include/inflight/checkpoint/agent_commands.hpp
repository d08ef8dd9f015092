// The agent's messages for the operator's commands (`checkpoints list|show|
// prune`, `runs list|show|logs|prune`): the envelope, the version and the
// store steps are agent_protocol.hpp's (docs/agent-protocol.md).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "inflight/checkpoint/agent_protocol.hpp"
#include "inflight/core/word_table.hpp"

namespace inflight::agent {

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
  std::vector<std::string> problems;
  std::string digest;      // what the rows follow from (checkpoint::RunListing)
  bool unchanged = false;  // the digest is `known_digest`: nothing written
};
INFLIGHT_AGENT_MESSAGE(RunsListed, url, problems, digest, unchanged)

// The listing as the command prints it (runs_list_output.hpp), written to `path`, a file the
// caller made.
struct ListRuns {
  static constexpr std::string_view op = "list_runs";
  using Answer = RunsListed;
  // Only runs in this state; empty: every run. `live` and `waiting` leave the index unread.
  std::string state;
  bool json = false;  // `{"runs": [ … ]}`, else a table
  std::string path;
  // The digest of the caller's last listing: an unchanged repo is answered without a listing.
  std::optional<std::string> known_digest;
};
INFLIGHT_AGENT_MESSAGE(ListRuns, state, json, path, known_digest)

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

// `inflight runs migrate`: layout 1's index entries copied into layout 2's log, their results
// folded into the archive (checkpoint::migrate_runs).
struct RunsMigrated {
  std::string url;
  std::uint64_t copied = 0;  // or, with dry_run, would be
  std::uint64_t folded = 0;
  std::vector<std::string> problems;
  std::vector<std::string> failed;  // refs the server did not update
};
INFLIGHT_AGENT_MESSAGE(RunsMigrated, url, copied, folded, problems, failed)

struct MigrateRuns {
  static constexpr std::string_view op = "migrate_runs";
  using Answer = RunsMigrated;
  bool dry_run = false;
};
INFLIGHT_AGENT_MESSAGE(MigrateRuns, dry_run)

// `inflight runs compact`: layout 2's log rewritten as few commits (checkpoint::compact_runs).
struct RunsCompacted {
  std::string url;
  std::uint64_t entries = 0;
  std::uint64_t removals = 0;
  std::uint64_t commits_before = 0;
  std::uint64_t commits_after = 0;  // or, with dry_run, would be
  std::vector<std::string> problems;
  std::vector<std::string> failed;
};
INFLIGHT_AGENT_MESSAGE(RunsCompacted, url, entries, removals, commits_before, commits_after,
                       problems, failed)

struct CompactRuns {
  static constexpr std::string_view op = "compact_runs";
  using Answer = RunsCompacted;
  bool dry_run = false;
};
INFLIGHT_AGENT_MESSAGE(CompactRuns, dry_run)

}  // namespace inflight::agent
