// Publishing a finished run (docs/results.md): its
// result, the final run dir as plain files on `refs/inflight-results/<id>`,
// created only if absent, and its entry in the index: layout 1's
// `inflight-index` branch, fast-forward only and built again on a tip another
// pod moved, or a delta of layout 2's log when the results repo has one.
#include <git2.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/git_handle.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"
#include "inflight/checkpoint/checkpoint_store.hpp"
#include "inflight/checkpoint/index_entry.hpp"
#include "inflight/checkpoint/run_listing.hpp"
#include "snapshot/plain_tree.hpp"
#include "snapshot/tree_validation.hpp"
#include "store/index_commit.hpp"
#include "store/runs_index.hpp"
#include "store/store_steps.hpp"

namespace inflight::checkpoint {

namespace {

// Each try reads the index tip anew, after a random wait (back_off), and
// each round of a race has a winner: a pod publishes one batch at a time
// (its releases take turns). Past this many lost in a row it tries again at
// its next step.
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

// An index someone rewrote with `runs` as anything but a folder could never
// take an entry again (a file cannot hold one): the next index commit drops
// it, so that releases go on.
git_oid without_spoilt_runs(git_repository* git, const git_oid& root) {
  const TreeHandle tree = lookup_tree(git, root);
  const git_tree_entry* runs = git_tree_entry_byname(tree.get(), "runs");
  if (runs == nullptr || git_tree_entry_filemode(runs) == GIT_FILEMODE_TREE) return root;
  const git_tree_update removal{.action = GIT_TREE_UPDATE_REMOVE,
                                .id = git_oid{},
                                .filemode = GIT_FILEMODE_UNREADABLE,
                                .path = "runs"};
  git_oid without;
  git_check(git_tree_create_updated(&without, git, tree.get(), 1, &removal),
            "drop the index's runs");
  return without;
}

// The records of a final state. The final checkpoint's trailer counts them; a periodic
// checkpoint's counts what the supervisor had seen when it asked for the save, and its snapshot
// may hold the final state all the same (the pod died before the final one). Then the progress
// file's complete lines in the tree count them, when it is one blob (a chunked one keeps the
// trailer's count).
std::uint64_t final_records(CacheRepo& cache, const std::string& commit, const RunParams& params,
                            const CheckpointMessage& message) {
  const auto trailer = message.records.value_or(0);
  if (message.reason == CheckpointReason::final) return trailer;
  const auto progress_file = params.child.find("progress_file");
  if (progress_file == params.child.end() || !progress_file->is_string()) return trailer;
  return lines_of_blob_at(cache, commit, progress_file->get<std::string>()).value_or(trailer);
}

}  // namespace

std::optional<std::string> write_index(CacheRepo& cache, const std::optional<std::string>& tip,
                                       const std::vector<IndexFile>& files) {
  git_repository* git = raw_repo(cache);
  CommitHandle parent;
  git_oid base = empty_tree(git);
  if (tip) {
    parent = lookup_commit(git, *tip);
    base = *git_commit_tree_id(parent.get());
  }
  std::vector<git_tree_update> updates;
  for (const auto& [path, text] : files)
    updates.push_back({.action = GIT_TREE_UPDATE_UPSERT,
                       .id = write_object(cache, text.data(), text.size(), GIT_OBJECT_BLOB),
                       .filemode = GIT_FILEMODE_BLOB,
                       .path = path.c_str()});
  const git_oid start = without_spoilt_runs(git, base);
  git_oid tree;
  git_check(git_tree_create_updated(&tree, git, lookup_tree(git, start).get(), updates.size(),
                                    updates.data()),
            "update the index tree");
  if (git_oid_equal(&tree, &base)) return std::nullopt;
  const std::string subject = files.size() == 1
                                  ? "inflight index: " + files.front().first
                                  : "inflight index: " + std::to_string(files.size()) + " runs";
  return oid_hex(write_commit(cache, tree, parent.get(), subject));
}

std::optional<std::string> index_with_paths_of(CacheRepo& cache, const std::string& index,
                                               const std::optional<std::string>& base,
                                               const std::vector<std::string>& paths) {
  git_repository* git = raw_repo(cache);
  const CommitHandle parent = lookup_commit(git, index);
  const TreeHandle base_tree = base ? tree_of(lookup_commit(git, *base).get()) : TreeHandle();
  std::vector<TreeEntryHandle> kept;
  std::vector<git_tree_update> updates;
  for (const auto& path : paths) {
    git_tree_entry* raw = nullptr;
    const bool had = base_tree && git_tree_entry_bypath(&raw, base_tree.get(), path.c_str()) == 0;
    if (!had) git_error_clear();
    kept.emplace_back(raw);
    updates.push_back({.action = had ? GIT_TREE_UPDATE_UPSERT : GIT_TREE_UPDATE_REMOVE,
                       .id = had ? *git_tree_entry_id(raw) : git_oid{},
                       .filemode = GIT_FILEMODE_BLOB,
                       .path = path.c_str()});
  }
  const git_oid* from = git_commit_tree_id(parent.get());
  git_oid tree;
  git_check(git_tree_create_updated(&tree, git, lookup_tree(git, *from).get(), updates.size(),
                                    updates.data()),
            "put index entries back");
  if (git_oid_equal(&tree, from)) return std::nullopt;
  return oid_hex(write_commit(cache, tree, parent.get(),
                              "inflight index: withdraw " + std::to_string(paths.size()) +
                                  " entries of runs another pod holds"));
}

std::optional<RefUpdate> index_update(CacheRepo& cache, const IndexTarget& target,
                                      const std::vector<RunEntry>& entries) {
  if (target.log) {
    std::string lines;
    for (const auto& run : entries) lines += write_index_line(run.entry);
    return runs_log_delta(std::move(lines));
  }
  std::vector<IndexFile> files;
  for (const auto& run : entries) files.emplace_back(index_path(run.entry.id), run.file);
  const auto index = write_index(cache, target.flat_tip, files);
  if (!index) return std::nullopt;
  return RefUpdate{.ref = std::string(kIndexRef), .commit = *index, .from = {}};
}

// One listing of the results repo says which layout it keeps (layout 2's log is never
// downloaded), whether it has layout 2's archive, and which runs have a result ref; layout 1's
// index tip comes over the same connection. A repo with neither index gets the layout of
// StoreConfig::results_layout.
IndexTarget CheckpointStore::index_target() {
  // Every ref, at the cost of the heads alone: a server advertises them all to every connection.
  const auto listing = remote_.list("refs/", RemoteStore::Tips::flat_index);
  IndexTarget target;
  std::optional<RemoteBranch> index;
  for (const auto& ref : listing) {
    if (ref.ref == kRunsLogRef) target.log = true;
    if (ref.ref == kArchiveRef) target.archive = true;
    if (ref.ref == kIndexRef) index = ref;
    if (auto run_id = parse_result_ref(ref.ref)) target.results.insert(std::move(*run_id));
  }
  // Not whether result refs are listed: a publish lands its results before its entries, and a
  // repo that got its first result and not yet its log is no layout-1 repo.
  if (!index && config_.results_layout == 2) target.log = true;
  if (target.log || !index) return target;
  try {
    target.flat_tip = remote_.fetch_listed(*index);
  } catch (const GitError& e) {
    if (e.kind() != Failure::not_found) throw;  // else deleted since it was listed
  }
  return target;
}

// Whether a publication of run `run_id` was folded into layout 2's archive already: a create of
// its result ref would then make a second result once the pod that folded it deleted the ref
// (docs/results.md "The history layout"). Asked whenever the archive is there, the result ref
// listed or not: that pod's unref may fall between this listing and the create, but not between
// this look and the create, since its fold comes first by the retention, which is at least an
// agent's deadline. `unknown` lets the publish go: a server that serves no marker by id never has
// a ref deleted (unref_folded() asks first). A look that fails is a failure to try again.
std::optional<Error> CheckpointStore::folded_elsewhere(const IndexTarget& target,
                                                       const std::string& run_id) {
  if (!target.archive) return std::nullopt;
  try {
    if (remote_.archived(run_id) != RemoteStore::Reachable::yes) return std::nullopt;
  } catch (const GitError& e) {
    if (e.kind() == Failure::cache) throw;
    return publish_failure(Failure::other,
                           "run " + run_id + " not published: " + std::string(kArchiveRef) +
                               " could not be asked whether it holds the run: " + e.what());
  }
  return publish_failure(Failure::rejected, "run " + run_id +
                                                " was published by another pod first (" +
                                                std::string(kArchiveRef) + " holds its result)");
}

// The result and the index entry of a finished run, made in the cache.
// The final checkpoint may be a branch's another pod wrote: its tree is
// checked within the restore limits before a byte of it is joined.
CheckpointStore::Publication CheckpointStore::publication(const std::string& final_commit) {
  git_repository* git = raw_repo(cache_);
  validate_run_tree(git, tree_of(lookup_commit(git, final_commit).get()).get(),
                    config_.restore_limits);
  const auto text = read_file_at(cache_, final_commit, kRunParamsFile, kMaxRunParamsBytes);
  if (!text) throw std::runtime_error("the final checkpoint has no run-params.json");
  const auto params = run_params_from_text(*text);
  const auto message = parse_checkpoint_message(commit_summary(cache_, final_commit).message);
  const auto records = final_records(cache_, final_commit, params, message);
  auto entry = index_entry_of(params, records, message.total);
  auto file = write_index_entry(entry);
  entry.result_commit = write_result(cache_, final_commit, params);
  return {.run_id = params.run_id,
          .result = *entry.result_commit,
          .entry = {.entry = std::move(entry), .file = std::move(file)},
          .result_landed = false,
          .failure = std::nullopt};
}

std::vector<Result<void>> CheckpointStore::publish(
    const std::vector<std::string>& final_commits,
    const std::map<std::string, std::string>& logged) {
  std::vector<Result<void>> answers(final_commits.size(), Result<void>{});
  std::vector<Publication> publications;
  std::vector<std::size_t> asked;   // the final commit of each publication
  std::optional<IndexTarget> look;  // one listing, for the layout and the archive
  for (std::size_t i = 0; i < final_commits.size(); ++i) {
    try {
      auto publication = this->publication(final_commits[i]);
      const auto entry = logged.find(publication.run_id);
      if (entry != logged.end() && entry->second != publication.result) {
        answers[i] = publish_failure(
            Failure::rejected,
            "run " + publication.run_id + " is published with another result (" +
                (entry->second.empty() ? "its index entry names none" : entry->second) + ", not " +
                publication.result + ")");
        continue;
      }
      if (!look) look = index_target();
      if (auto folded = folded_elsewhere(*look, publication.run_id)) {
        // The very result an entry names, folded: published, nothing to create.
        if (entry == logged.end() || folded->kind != Failure::rejected) answers[i] = *folded;
        continue;
      }
      publications.push_back(std::move(publication));
      asked.push_back(i);
    } catch (const GitError& e) {
      if (e.network() || e.kind() == Failure::cache) throw;
      answers[i] = e.error();
    } catch (const std::exception& e) {
      answers[i] = publish_failure(Failure::other, e.what());
    }
  }
  if (publications.empty()) return answers;
  const auto outcome = publish_all(publications, std::move(look));
  for (std::size_t n = 0; n < publications.size(); ++n) {
    if (publications[n].failure)
      answers[asked[n]] = *publications[n].failure;
    else if (outcome)
      answers[asked[n]] = *outcome;
  }
  return answers;
}

// The result ref, which holds another commit than `result`, and whether it
// holds the same run dir: the same final state published again (another pod
// found the branch first, or this release's final checkpoint was made
// twice). nullopt when there is no result ref (the push lost a race for its
// lock).
std::optional<CheckpointStore::HeldResult> CheckpointStore::held_result(const std::string& run_id,
                                                                        const std::string& result) {
  std::string theirs;
  try {
    theirs = remote_.fetch(result_ref(run_id));
  } catch (const GitError& e) {
    if (e.kind() == Failure::not_found) return std::nullopt;
    throw;
  }
  const bool same =
      git_oid_equal(git_commit_tree_id(lookup_commit(raw_repo(cache_), theirs).get()),
                    git_commit_tree_id(lookup_commit(raw_repo(cache_), result).get()));
  return HeldResult{.commit = std::move(theirs), .same = same};
}

// Each result ref is created alone first; the index, with the entries of
// those that landed, in a later push: an entry never describes a run whose
// result another pod published. Each push is tried again on the tips as they
// are then (a ref the server did not take as two pods' pushes raced for its
// lock, an index tip another pod moved) until all landed or kIndexTries are
// spent; nullopt when all landed, else why not.
std::optional<Error> CheckpointStore::publish_all(std::vector<Publication>& publications,
                                                  std::optional<IndexTarget> look) {
  std::string last_failure;
  for (int attempt = 1; attempt <= kIndexTries; ++attempt) {
    if (attempt > 1) back_off(attempt);
    if (!push_results(publications, last_failure)) continue;
    std::vector<RunEntry> entries;
    for (const auto& publication : publications)
      if (!publication.failure) entries.push_back(publication.entry);
    if (entries.empty()) return std::nullopt;
    // The look publish() made serves the first try (an index tip moved since costs a try).
    const auto target = look ? *std::exchange(look, std::nullopt) : index_target();
    const auto update = index_update(cache_, target, entries);
    if (!update) return std::nullopt;
    const auto landed = remote_.update({*update});
    if (landed[0].outcome == RefOutcome::updated) {
      if (target.log)
        for (const auto& publication : publications)
          if (!publication.failure)
            record_for_fold(publication.run_id, *publication.entry.entry.result_commit);
      return std::nullopt;
    }
    last_failure = update->ref + ": " + landed[0].detail;
    // The server's own rule: no try of this step changes its mind.
    if (landed[0].outcome == RefOutcome::refused)
      return publish_failure(Failure::refused, last_failure);
  }
  return publish_failure(Failure::other, last_failure + " (" + std::to_string(kIndexTries) +
                                             " tries, another pod's update won each)");
}

// Creates the result refs not yet landed; whether all of those still going
// did. One another pod holds with another run dir ends its publication.
bool CheckpointStore::push_results(std::vector<Publication>& publications,
                                   std::string& last_failure) {
  std::vector<RefUpdate> updates;
  std::vector<Publication*> pushed;
  for (auto& publication : publications) {
    if (publication.result_landed || publication.failure) continue;
    updates.push_back(
        {.ref = result_ref(publication.run_id), .commit = publication.result, .from = ""});
    pushed.push_back(&publication);
  }
  if (updates.empty()) return true;
  const auto results = remote_.update(updates);
  bool all = true;
  for (std::size_t i = 0; i < updates.size(); ++i) {
    auto& publication = *pushed[i];
    const auto outcome = results[i].outcome;
    if (outcome == RefOutcome::refused) {
      publication.failure =
          publish_failure(Failure::refused, updates[i].ref + ": " + results[i].detail);
      continue;
    }
    const auto held = outcome == RefOutcome::taken
                          ? held_result(publication.run_id, publication.result)
                          : std::nullopt;
    // Taken and gone again: folded and deleted meanwhile, or a prune.
    if (outcome == RefOutcome::taken && !held)
      if ((publication.failure = folded_elsewhere({.archive = true}, publication.run_id))) continue;
    if (held && !held->same) {
      publication.failure = publish_failure(
          Failure::rejected, "run " + publication.run_id + " was published by another pod first (" +
                                 results[i].detail + ")");
      continue;
    }
    publication.result_landed = outcome == RefOutcome::updated || held;
    if (held) publication.entry.entry.result_commit = held->commit;  // the one that stands
    if (publication.result_landed) continue;
    all = false;
    last_failure = updates[i].ref + ": " + results[i].detail;
  }
  return all;
}

std::map<std::string, Result<void>> CheckpointStore::publish_before_prune(
    const std::vector<std::string>& refs, const std::vector<RemoteBranch>& listing) {
  std::map<std::string, Result<void>> outcomes;
  if (!config_.publish || refs.empty()) return outcomes;
  std::set<std::string> published;
  for (const auto& ref : listing)
    if (auto run_id = parse_result_ref(ref.ref)) published.insert(std::move(*run_id));
  std::vector<std::string> finals, publishing;
  for (const auto& ref : listing) {
    const auto name = parse_branch_ref(ref.ref);
    if (!name || published.contains(name->run_id) ||
        std::find(refs.begin(), refs.end(), ref.ref) == refs.end())
      continue;
    try {
      const auto tip = remote_.fetch_listed(ref);
      const auto text = read_file_at(cache_, tip, kRunParamsFile, kMaxRunParamsBytes);
      if (!text || !run_params_from_text(*text).final_status) continue;
      finals.push_back(tip);
      publishing.push_back(ref.ref);
    } catch (const GitError& e) {
      if (e.network()) throw;
      outcomes.emplace(ref.ref, e.error());
    } catch (const std::exception&) {
      // No run-params.json to read: not a finished run's state, nothing to publish.
    }
  }
  if (finals.empty()) return outcomes;
  // A run an index lists without a result ref (a folded one's may be gone) is published only as
  // the result its entry names.
  std::vector<std::string> problems;  // a bad entry is the listing's to report, not a prune's
  std::map<std::string, std::string> logged;
  for (auto& [run_id, entry] : read_indexes(cache_, remote_, listing, problems).entries)
    if (!published.contains(run_id)) logged.emplace(run_id, entry.result_commit.value_or(""));
  const auto results = publish(finals, logged);
  for (std::size_t i = 0; i < results.size(); ++i) outcomes.emplace(publishing[i], results[i]);
  return outcomes;
}

}  // namespace inflight::checkpoint
