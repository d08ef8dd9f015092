// Publishing a finished run (README "Results that outlive the pod"): its
// result, the final run dir as plain files on `refs/inflight-results/<id>`,
// created only if absent, and its entry in the `inflight-index` branch, fast-
// forward only and built again on a tip another pod moved.
#include <git2.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/git_handle.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"
#include "inflight/checkpoint/checkpoint_store.hpp"
#include "inflight/checkpoint/index_entry.hpp"
#include "snapshot/plain_tree.hpp"

namespace inflight::checkpoint {

namespace {

// Each try reads the index tip anew, after a random wait (back_off), and
// each round of a race has a winner: a pod publishes one run at a time (its
// releases take turns). Past this many lost in a row it tries again at its
// next step.
constexpr int kIndexTries = 10;

// The same run dir published twice, by a retry or after a restart, is the
// same commit: its time is its final checkpoint's, never now.
std::string write_result(CacheRepo& cache, const std::string& final_commit,
                         const RunParams& params) {
  git_repository* git = raw_repo(cache);
  const CommitHandle final_state = lookup_commit(git, final_commit);
  const git_oid tree = plain_tree(cache, tree_of(final_state.get()).get());
  const std::string message = "inflight result " + params.run_id + " (" +
                              params.final_status.value_or("") + ")\n\n" +
                              trailer_line(kPodTrailer, params.origin_pod);
  return oid_hex(
      write_commit(cache, tree, final_state.get(), message, git_commit_time(final_state.get())));
}

// The index of `tip` (none: an empty one) with `path` holding `text`; nullopt
// when it holds that already.
std::optional<std::string> write_index(CacheRepo& cache, const std::optional<std::string>& tip,
                                       const std::string& path, const std::string& text) {
  git_repository* git = raw_repo(cache);
  CommitHandle parent;
  git_oid base = empty_tree(git);
  if (tip) {
    parent = lookup_commit(git, *tip);
    base = *git_commit_tree_id(parent.get());
  }
  const git_oid blob = write_object(cache, text.data(), text.size(), GIT_OBJECT_BLOB);
  git_tree_update update{.action = GIT_TREE_UPDATE_UPSERT,
                         .id = blob,
                         .filemode = GIT_FILEMODE_BLOB,
                         .path = path.c_str()};
  git_oid tree;
  git_check(git_tree_create_updated(&tree, git, lookup_tree(git, base).get(), 1, &update),
            "update the index tree");
  if (git_oid_equal(&tree, &base)) return std::nullopt;
  return oid_hex(write_commit(cache, tree, parent.get(), "inflight index: " + path));
}

// Before try `attempt` (from 2): pods that lost a race to one another would
// otherwise push again at the same moment, and a server that locks the ref
// for one push refuses the others. A random wait, doubling up to 400 ms, lets
// one through at a time (client-go's RetryOnConflict does the same); this
// runs in the agent's own process, never on serve's event loop.
void back_off(int attempt) {
  static thread_local std::minstd_rand random{std::random_device{}()};
  const int ceiling_ms = 25 << std::min(attempt - 2, 4);
  std::this_thread::sleep_for(
      std::chrono::milliseconds(std::uniform_int_distribution<int>(0, ceiling_ms)(random)));
}

Error publish_failure(Failure kind, std::string message) {
  return {.kind = kind, .message = std::move(message), .candidates = {}};
}

}  // namespace

std::optional<std::string> CheckpointStore::index_tip() {
  try {
    return remote_.fetch(std::string(kIndexRef));
  } catch (const GitError& e) {
    if (e.kind() == Failure::not_found) return std::nullopt;
    throw;
  }
}

Result<void> CheckpointStore::publish(const std::string& final_commit) {
  try {
    const auto text = read_file_at(cache_, final_commit, kRunParamsFile);
    if (!text)
      return publish_failure(Failure::other, "the final checkpoint has no run-params.json");
    const auto params = run_params_from_text(*text);
    const auto records =
        parse_checkpoint_message(commit_summary(cache_, final_commit).message).records;
    const auto entry = write_index_entry(index_entry_of(params, records.value_or(0), std::nullopt));
    const auto result = write_result(cache_, final_commit, params);
    return publish_entry(params.run_id, result, entry);
  } catch (const GitError& e) {
    return e.error();
  } catch (const std::exception& e) {
    return publish_failure(Failure::other, e.what());
  }
}

// Whether the result ref, which holds another commit than `result`, holds
// the same run dir: the same final state published again (another pod found
// the branch first, or this release's final checkpoint was made twice).
bool CheckpointStore::same_result(const std::string& run_id, const std::string& result) {
  const auto theirs = remote_.fetch(result_ref(run_id));
  return git_oid_equal(git_commit_tree_id(lookup_commit(raw_repo(cache_), theirs).get()),
                       git_commit_tree_id(lookup_commit(raw_repo(cache_), result).get()));
}

// The result and the index entry in one push; then whatever did not land, on
// the tips as they are then, until both did or kIndexTries are spent. A ref
// the server did not take (two pods' pushes raced for its lock) is tried
// again like a moved index tip.
Result<void> CheckpointStore::publish_entry(const std::string& run_id, const std::string& result,
                                            const std::string& entry) {
  bool result_landed = false;
  std::string last_failure;
  for (int attempt = 1; attempt <= kIndexTries; ++attempt) {
    if (attempt > 1) back_off(attempt);
    std::vector<RefUpdate> updates;
    if (!result_landed)
      updates.push_back({.ref = result_ref(run_id), .commit = result, .from = ""});
    if (const auto index = write_index(cache_, index_tip(), index_path(run_id), entry))
      updates.push_back({.ref = std::string(kIndexRef), .commit = *index, .from = {}});
    if (updates.empty()) return {};
    const auto results = remote_.update(updates);
    bool index_landed = updates.back().ref != kIndexRef;
    for (std::size_t i = 0; i < updates.size(); ++i) {
      const auto outcome = results[i].outcome;
      const bool is_result = updates[i].ref != kIndexRef;
      if (outcome == RefOutcome::taken && is_result && !same_result(run_id, result))
        return publish_failure(
            Failure::rejected,
            "run " + run_id + " was published by another pod first (" + results[i].detail + ")");
      const bool landed =
          outcome == RefOutcome::updated || (outcome == RefOutcome::taken && is_result);
      (is_result ? result_landed : index_landed) = landed;
      if (!landed) last_failure = updates[i].ref + ": " + results[i].detail;
    }
    if (result_landed && index_landed) return {};
  }
  return publish_failure(Failure::other, last_failure + " (" + std::to_string(kIndexTries) +
                                             " tries, another pod's update won each)");
}

}  // namespace inflight::checkpoint
