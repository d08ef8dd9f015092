// Layout 2's archive (docs/design/history-layout.md §3.1, §3.4): one chain of commits that keeps
// every published result reachable, so that a result ref need not stay once its run is folded.
// Each fold is a commit whose parents are the archive's tip (the genesis G for the first), then
// each run's result commit, and whose tree holds, under each run's id, the run's status marker
// S(id, status), which holds its publish marker M(id), and the marker K that a lookup knows is
// there (git/markers.hpp). Its own entries only: the tree of a fold built on a tip this pod never
// downloaded cannot carry the tip's.
// Nobody reads the archive: a pod pushes a fold on the tip the server advertises
// (RefUpdate::build), and asks the server for a marker by id.
//
// Which results this pod still has to fold is kept in its cache, one record per run
// (`refs/inflight-local/to-fold/<run-id>` at the result commit): set when the run's entry
// landed in layout 2's log, dropped when a fold of it landed. A landed fold leaves a record of
// its own (`refs/inflight-local/folded/<unix-seconds>/<run-id>`, the time of this machine's
// clock), until the unref: once StoreConfig::results_ref_retention passed, a push deletes the
// result ref, expecting the commit the record holds. Only this pod's clock is read against it.
//
// A fold rides a push of checkpoints only once the server took a fold from this cache
// (`refs/inflight-local/archive-takes-folds`, at a result that fold carried): until then, and
// again after a refusal, it goes in a push of its own, so that a server whose hook declines the
// archive (and with it the whole push) declines no checkpoint but the one that found it out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "inflight/checkpoint/store_types.hpp"

namespace inflight::checkpoint {

inline constexpr std::string_view kFoldRecordPrefix = "refs/inflight-local/to-fold/";
inline constexpr std::string_view kFoldsTakenRecord = "refs/inflight-local/archive-takes-folds";
// Runs per fold commit (a parent and a tree entry each); a push carries a chain of folds.
inline constexpr std::size_t kRunsPerFold = 1000;
// Runs one push folds at most; the rest wait for the next.
inline constexpr std::size_t kRunsFoldedPerPush = 10 * kRunsPerFold;

struct ArchivedRun {
  std::string run_id;
  std::string result;        // the result commit the run's ref holds (hex); none when empty
  std::string final_status;  // succeeded, failed or cancelled; empty: M(id) alone, no S(id, …)
  // false: no marker, the result alone. A result ref with no entry yet is a release under way: a
  // marker would make its own retry find the run published by another pod.
  bool marked;
};

std::string fold_record(std::string_view run_id);

inline constexpr std::string_view kFoldedRecordPrefix = "refs/inflight-local/folded/";
// Result refs one push deletes at most; the rest wait for the next.
inline constexpr std::size_t kUnrefsPerPush = 2000;

std::string folded_record(std::string_view run_id, std::int64_t unix_seconds);
struct FoldedRecord {
  std::string run_id;
  std::int64_t unix_seconds = 0;
};
// nullopt for a name that is no folded record (the cache is ours, but a bad one costs nothing).
std::optional<FoldedRecord> parse_folded_record(std::string_view ref);

// The update that folds `runs` (at most kRunsFoldedPerPush, at least one) into the archive:
// built on the advertised tip, never downloaded, or on a new genesis where there is none.
RefUpdate archive_fold(std::vector<ArchivedRun> runs);
// The update that replaces the archive at `tip` by folds of `runs` alone, on the genesis: a
// prune's, so that no fold keeps a pruned result reachable. A fold that landed since the caller
// listed `tip` makes the update `taken`; a later prune rebuilds from the index again.
RefUpdate archive_rebuilt(std::vector<ArchivedRun> runs, std::string tip);

}  // namespace inflight::checkpoint
