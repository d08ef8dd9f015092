// What the parts of a restore share (restore.cpp, restore_claims.cpp,
// restore_local.cpp): the one push a restore makes, and what a claim's
// commit says.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "inflight/checkpoint/checkpoint_store.hpp"
#include "inflight/core/run_dir.hpp"
#include "snapshot/run_dir_writers.hpp"

namespace inflight::checkpoint {

inline std::uint64_t records_of(const std::filesystem::path& dir, const RunVerdict& verdict) {
  return verdict.progress_file.empty() ? 0 : RecordCounter().count(dir, verdict.progress_file);
}

// What a claim commit says: this pod took the run at its attempt so far.
inline CheckpointInfo claim_info(const RunParams& params, const std::string& pod,
                                 std::uint64_t records, std::optional<std::uint64_t> total) {
  return {.run_id = params.run_id,
          .attempt = static_cast<int>(params.attempts.size()),
          .reason = CheckpointReason::claim,
          .pod = pod,
          .records = records,
          .total = total};
}

struct CheckpointStore::RestorePush {
  // A branch copy a writer is materialising while the claim is pushed; moved
  // in once both are done.
  struct WrittenCopy {
    RemoteBranch branch;
    std::string tip;
    RunParams params;
    StagedCopy staged;                     // its future: the records it counted, if asked
    std::optional<std::uint64_t> records;  // known before the write: one blob
    std::optional<std::uint64_t> total;
  };

  explicit RestorePush(const std::filesystem::path& cache) : writers(cache) {}
  // A copy not moved in by now was not claimed (or the restore failed): it
  // goes, once no writer is at work on it.
  ~RestorePush() {
    writers.stop();
    std::error_code ec;
    for (const auto& dir : staging) std::filesystem::remove_all(dir, ec);
  }

  std::vector<RefUpdate> updates;
  std::vector<std::function<void(const RefResult&)>> settle;  // one per update
  std::vector<std::filesystem::path> staging;  // branch copies written beside their run dirs
  RunDirWriters writers;
  std::vector<WrittenCopy> written;  // claim_written() adds their claims
  // Run ids published, never run again: nullopt when a result ref holds the run, else the
  // result commit its index entry names (empty when it names none).
  std::map<std::string, std::optional<std::string>> published;
  // The repo has layout 2's archive, and its index was not read (index_failed: could not be): a
  // run without a ref is looked up there.
  bool unsure = false;
  bool index_failed = false;
  // Runs looked up in the archive already, and whether it holds them.
  std::map<std::string, bool> looked_up;

  // Whether a lookup found run `run_id` in the archive.
  bool archived(const std::string& run_id) const {
    const auto found = looked_up.find(run_id);
    return found != looked_up.end() && found->second;
  }
  // The runs with a result ref, each published with no entry.
  std::vector<PublishedRun> with_result_refs(const std::set<std::string>& run_ids) {
    std::vector<PublishedRun> runs;
    for (const auto& id : run_ids) {
      published.emplace(id, std::nullopt);
      runs.push_back({.run_id = id, .entry = std::nullopt});
    }
    return runs;
  }

  void add(RefUpdate update, std::function<void(const RefResult&)> then) {
    updates.push_back(std::move(update));
    settle.push_back(std::move(then));
  }
};

}  // namespace inflight::checkpoint
