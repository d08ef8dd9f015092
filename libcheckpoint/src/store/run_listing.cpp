#include "inflight/checkpoint/run_listing.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/git_handle.hpp"
#include "git/markers.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"
#include "inflight/checkpoint/branch_listing.hpp"
#include "inflight/core/bounded_json.hpp"
#include "inflight/core/clock.hpp"
#include "store/archive_fold.hpp"
#include "store/runs_index.hpp"

namespace inflight::checkpoint {

namespace {

// What one listing of the whole results repo says, before any tip is read.
struct RefMap {
  std::vector<RemoteBranch> branches;
  std::set<std::string> leased_pods;
  std::set<std::string> published;  // run ids with a result ref
  std::optional<RemoteBranch> index;
  std::optional<RemoteBranch> runs;            // layout 2's snapshot
  std::optional<RemoteBranch> runs_log;        // and its log
  std::optional<RemoteBranch> archive;         // and its archive of results
  std::map<std::string, std::string> results;  // by run id: the commit its result ref holds
};

RefMap map_refs(const std::vector<RemoteBranch>& refs, std::vector<std::string>& problems) {
  RefMap map;
  map.published = published_run_ids(refs, problems);
  for (const auto& ref : refs) {
    if (parse_branch_ref(ref.ref)) map.branches.push_back(ref);
    if (auto pod = parse_lease_ref(ref.ref)) map.leased_pods.insert(std::move(*pod));
    if (ref.ref == kIndexRef) map.index = ref;
    if (ref.ref == kRunsRef) map.runs = ref;
    if (ref.ref == kRunsLogRef) map.runs_log = ref;
    if (ref.ref == kArchiveRef) map.archive = ref;
    if (auto run_id = parse_result_ref(ref.ref)) map.results.emplace(std::move(*run_id), ref.oid);
  }
  return map;
}

// How rows are made of the refs: a change to it changes every digest.
constexpr int kRowsVersion = 1;

// A hash of the listing and what is read of it: git's object id of that text (a cache key, not a
// proof). A lease counts by its name alone: rows read only which pods hold one, and a live fleet
// renews its leases every period.
std::string listing_digest(const std::vector<RemoteBranch>& refs, bool finished) {
  std::string text = "inflight runs list " + std::to_string(kRowsVersion) +
                     (finished ? " all\n" : " unfinished\n");
  for (const auto& ref : refs)
    text += (parse_lease_ref(ref.ref) ? std::string("lease") : ref.oid) + " " + ref.ref + "\n";
  git_oid oid;
  git_check(git_odb_hash(&oid, text.data(), text.size(), GIT_OBJECT_BLOB), "hash the listing");
  return oid_hex(oid);
}

SpentBudgets spent_of(const std::vector<IndexAttempt>& attempts) {
  RunParams params;
  for (const auto& a : attempts) {
    AttemptRecord attempt;
    attempt.outcome = a.outcome;
    params.attempts.push_back(std::move(attempt));
  }
  return spent_budgets(params);
}

RunRow row_of(const IndexEntry& entry) {
  const auto spent = spent_of(entry.attempts);
  return {.id = entry.id,
          .state = entry.final_status,
          .pod = entry.pod,
          .attempts = entry.attempts.size(),
          .interruptions = static_cast<std::size_t>(spent.interruptions),
          .failures = static_cast<std::size_t>(spent.failures),
          .records = entry.records,
          .total = entry.total,
          .last_checkpoint_at = std::nullopt,
          .finished_at = entry.finished_at,
          .where = entry.result};
}

// The index file at `entry`, checked against its name and its size before
// it is read.
Result<IndexEntry> read_index_file(git_repository* git, git_odb* odb, const git_tree_entry* entry) {
  const std::string name = git_tree_entry_name(entry);
  const auto refused = [&](const std::string& why) {
    return Error{.kind = Failure::other,
                 .message = "index file runs/" + printable(name) + ": " + why,
                 .candidates = {}};
  };
  if (!name.ends_with(".json") || !is_valid_run_id(name.substr(0, name.size() - 5)) ||
      git_tree_entry_filemode(entry) != GIT_FILEMODE_BLOB)
    return refused("is not a file named <run-id>.json");
  std::size_t size = 0;
  git_object_t type{};
  git_check(git_odb_read_header(&size, &type, odb, git_tree_entry_id(entry)), "read " + name);
  if (size > kMaxIndexEntryBytes)
    return refused("is larger than " + std::to_string(kMaxIndexEntryBytes) + " bytes");
  git_blob* raw = nullptr;
  git_check(git_blob_lookup(&raw, git, git_tree_entry_id(entry)), "read " + name);
  const BlobHandle blob(raw);
  auto parsed = parse_index_entry({static_cast<const char*>(git_blob_rawcontent(blob.get())),
                                   static_cast<std::size_t>(git_blob_rawsize(blob.get()))});
  if (!parsed) return refused(parsed.error().message);
  if (parsed->id + ".json" != name) return refused("names run " + parsed->id);
  return parsed;
}

RunRow row_of_branch(CacheRepo& cache, RemoteStore& remote, const RemoteBranch& branch,
                     const std::set<std::string>& leased_pods) {
  const auto tip = remote.fetch_listed(branch);
  const auto commit = describe_commit(commit_summary(cache, tip));
  const auto text = read_file_at(cache, tip, kRunParamsFile, kMaxRunParamsBytes);
  if (!text) throw std::runtime_error("the checkpoint has no run-params.json");
  const auto params = run_params_from_text(*text);
  const auto spent = spent_budgets(params);
  return {
      .id = params.run_id,
      .state = params.final_status.value_or(leased_pods.contains(commit.pod) ? "live" : "waiting"),
      .pod = commit.pod,
      .attempts = params.attempts.size(),
      .interruptions = static_cast<std::size_t>(spent.interruptions),
      .failures = static_cast<std::size_t>(spent.failures),
      .records = commit.records,
      .total = commit.total,
      .last_checkpoint_at = iso8601_utc(SystemClock::from_time_t(commit.time)),
      .finished_at = std::nullopt,
      .where = short_branch(branch.ref)};
}

}  // namespace

std::set<std::string> published_run_ids(const std::vector<RemoteBranch>& refs,
                                        std::vector<std::string>& problems) {
  std::set<std::string> ids;
  for (const auto& ref : refs) {
    if (!ref.ref.starts_with(kResultPrefix)) continue;
    if (auto run_id = parse_result_ref(ref.ref))
      ids.insert(std::move(*run_id));
    else
      problems.push_back(printable(ref.ref) + ": not a run id; left alone");
  }
  return ids;
}

std::vector<IndexEntry> read_index(CacheRepo& cache, const std::string& tip,
                                   std::vector<std::string>& problems) {
  git_repository* git = raw_repo(cache);
  const TreeHandle root = tree_of(lookup_commit(git, tip).get());
  std::vector<IndexEntry> entries;
  const git_tree_entry* runs = git_tree_entry_byname(root.get(), "runs");
  if (runs == nullptr || git_tree_entry_filemode(runs) != GIT_FILEMODE_TREE) return entries;
  const TreeHandle tree = lookup_tree(git, *git_tree_entry_id(runs));
  const OdbHandle odb = open_odb(git);
  for (std::size_t i = 0; i < git_tree_entrycount(tree.get()); ++i) {
    auto entry = read_index_file(git, odb.get(), git_tree_entry_byindex(tree.get(), i));
    if (entry)
      entries.push_back(std::move(*entry));
    else
      problems.push_back(entry.error().message);
  }
  return entries;
}

namespace {

// The published runs both layouts' indexes list, layout 2's entry of an id over layout 1's: a
// repo being migrated holds both (docs/design/history-layout.md §4).
struct FinishedEntries {
  std::map<std::string, IndexEntry> entries;  // by run id
  std::set<std::string> flat;                 // the ids layout 1's index lists
  std::set<std::string> logged;               // the ids layout 2's index lists or removed
  std::string flat_tip;                       // layout 1's index, when there is one
  bool whole = true;                          // every listed index was read
};

// Each index on its own: one that cannot be read (a tip that is no commit) is a problem, and the
// other's entries are still read.
FinishedEntries finished_entries(CacheRepo& cache, RemoteStore& remote, const RefMap& refs,
                                 std::vector<std::string>& problems) {
  FinishedEntries finished;
  const auto each_index = [&](std::string_view ref, const auto& read) {
    try {
      read();
    } catch (const GitError& e) {
      if (e.network() || e.kind() == Failure::cache) throw;
      problems.push_back(std::string(ref) + ": " + e.what());
      finished.whole = false;
    }
  };
  if (refs.index)
    each_index(kIndexRef, [&] {
      const auto tip = remote.fetch_listed(*refs.index);
      for (auto& entry : read_index(cache, tip, problems)) {
        finished.flat.insert(entry.id);
        finished.entries.insert_or_assign(entry.id, std::move(entry));
      }
      finished.flat_tip = tip;
    });
  if (refs.runs || refs.runs_log)
    each_index(kRunsLogRef, [&] {
      const auto tip = [&](const std::optional<RemoteBranch>& ref) {
        return ref ? std::optional(remote.fetch_listed(*ref)) : std::nullopt;
      };
      auto index = read_runs_index(cache, tip(refs.runs), tip(refs.runs_log));
      for (auto& [id, entry] : index.entries) {
        finished.logged.insert(id);
        finished.entries.insert_or_assign(id, std::move(entry));
      }
      // A removal wins over layout 1's file too: a prune whose flat-index update was lost.
      for (const auto& id : index.removed) {
        finished.logged.insert(id);
        finished.entries.erase(id);
      }
      problems.insert(problems.end(), index.problems.begin(), index.problems.end());
      if (!index.problems.empty()) finished.whole = false;  // a line or a commit left unread
    });
  return finished;
}

}  // namespace

IndexReading read_indexes(CacheRepo& cache, RemoteStore& remote,
                          const std::vector<RemoteBranch>& listing,
                          std::vector<std::string>& problems) {
  std::vector<std::string> named;  // a bad result ref's name is the listing's problem, not ours
  auto finished = finished_entries(cache, remote, map_refs(listing, named), problems);
  return {.entries = std::move(finished.entries), .whole = finished.whole};
}

RunListing list_runs(CacheRepo& cache, RemoteStore& remote, bool finished,
                     const std::optional<std::string>& known) {
  RunListing listing;
  const auto tips =
      finished ? RemoteStore::Tips::downloaded : RemoteStore::Tips::downloaded_but_index;
  const auto listed = remote.list("refs/", tips);
  listing.digest = listing_digest(listed, finished);
  if (known == listing.digest) {
    listing.unchanged = true;
    return listing;
  }
  const auto refs = map_refs(listed, listing.problems);
  auto published = refs.published;  // and the runs an index lists: a folded one has no ref
  if (finished)
    for (const auto& [id, entry] :
         finished_entries(cache, remote, refs, listing.problems).entries) {
      listing.runs.push_back(row_of(entry));
      published.insert(id);
    }
  const auto before = listing.problems.size();
  for (const auto& branch : refs.branches) {
    if (published.contains(parse_branch_ref(branch.ref)->run_id)) continue;
    for_one_ref(branch.ref, listing.problems, [&] {
      listing.runs.push_back(row_of_branch(cache, remote, branch, refs.leased_pods));
    });
  }
  // A branch that could not be read may read next time (a full disk here): no digest.
  if (listing.problems.size() != before) listing.digest.clear();
  std::sort(listing.runs.begin(), listing.runs.end(),
            [](const RunRow& a, const RunRow& b) { return a.id < b.id; });
  return listing;
}

FetchedRun fetch_run(CacheRepo& cache, RemoteStore& remote, const std::string& run_id) {
  if (!is_valid_run_id(run_id))
    throw GitError(Failure::other, "'" + printable(run_id) + "' is not a run id");
  const auto listed = remote.list("refs/");
  std::vector<RemoteBranch> branches;
  for (const auto& ref : listed) {
    if (ref.ref == result_ref(run_id)) return {.commit = remote.fetch(ref.ref), .where = ref.ref};
    const auto name = parse_branch_ref(ref.ref);
    if (name && name->run_id == run_id) branches.push_back(ref);
  }
  if (branches.size() > 1)
    throw GitError(Failure::ambiguous, "several pods hold a branch of run " + run_id);
  if (branches.size() == 1)
    return {.commit = remote.fetch_listed(branches.front()),
            .where = short_branch(branches.front().ref)};
  // Neither a result ref nor a branch: layout 2 keeps a folded result reachable from its archive
  // alone, and its entry names the commit.
  std::vector<std::string> problems;
  const auto refs = map_refs(listed, problems);
  if (refs.runs_log) {
    const auto finished = finished_entries(cache, remote, refs, problems);
    const auto entry = finished.entries.find(run_id);
    if (entry != finished.entries.end() && entry->second.result_commit)
      return {.commit = remote.fetch_commit(*entry->second.result_commit),
              .where = std::string(kArchiveRef) + " (" + *entry->second.result_commit + ")"};
  }
  throw GitError(Failure::not_found, "no run " + run_id + " on " + remote.display_url());
}

namespace {

bool older_than(const IndexEntry& entry, std::int64_t min_age, std::int64_t now) {
  const auto finished = entry.finished_at ? parse_iso8601_utc(*entry.finished_at) : std::nullopt;
  if (!finished) return false;
  return now - SystemClock::to_time_t(*finished) >= min_age;
}

std::vector<std::string> runs_to_prune(const std::map<std::string, IndexEntry>& entries,
                                       const std::set<std::string>& published,
                                       const RunPruneRequest& request, std::int64_t now,
                                       RunPruneReport& report) {
  std::vector<std::string> chosen;
  if (request.older_than_seconds) {
    for (const auto& [id, entry] : entries)
      if (older_than(entry, *request.older_than_seconds, now)) chosen.push_back(id);
    return chosen;
  }
  for (const auto& id : request.run_ids) {
    if (entries.contains(id) || published.contains(id))
      chosen.push_back(id);
    else
      report.missing.push_back(id);
  }
  return chosen;
}

// The index without the files of `run_ids`, or nullopt when it has none of them.
std::optional<std::string> index_without(CacheRepo& cache, const std::string& tip,
                                         const std::vector<std::string>& run_ids) {
  git_repository* git = raw_repo(cache);
  const CommitHandle parent = lookup_commit(git, tip);
  std::vector<std::string> paths;
  std::vector<git_tree_update> removals;
  for (const auto& id : run_ids) paths.push_back(index_path(id));
  const TreeHandle base = tree_of(parent.get());
  for (const auto& path : paths) {
    git_tree_entry* raw = nullptr;
    if (git_tree_entry_bypath(&raw, base.get(), path.c_str()) != 0) {
      git_error_clear();
      continue;
    }
    git_tree_entry_free(raw);
    removals.push_back({.action = GIT_TREE_UPDATE_REMOVE,
                        .id = {},
                        .filemode = GIT_FILEMODE_BLOB,
                        .path = path.c_str()});
  }
  if (removals.empty()) return std::nullopt;
  git_oid tree;
  git_check(git_tree_create_updated(&tree, git, base.get(), removals.size(), removals.data()),
            "update the index tree");
  return oid_hex(write_commit(cache, tree, parent.get(),
                              "inflight index: pruned " + std::to_string(removals.size())));
}

// What the archive keeps after a prune: every published run but the pruned ones, each with its
// markers and its result (its ref's, else the one its entry names); a run with a ref and no entry
// (a release under way) with its result alone.
std::vector<ArchivedRun> archive_without(const RefMap& refs, const FinishedEntries& finished,
                                         const std::vector<std::string>& pruned) {
  const std::set<std::string> gone(pruned.begin(), pruned.end());
  std::map<std::string, ArchivedRun> kept;
  for (const auto& [id, entry] : finished.entries) {
    if (gone.contains(id)) continue;
    const auto ref = refs.results.find(id);
    kept[id] = {
        .run_id = id,
        .result = ref != refs.results.end() ? ref->second : entry.result_commit.value_or(""),
        .final_status = makes_markers(id, entry.final_status) ? entry.final_status : "",
        .marked = true};
  }
  for (const auto& [id, result] : refs.results)
    if (!gone.contains(id))
      kept.try_emplace(
          id, ArchivedRun{.run_id = id, .result = result, .final_status = "", .marked = false});
  std::vector<ArchivedRun> runs;
  for (auto& [id, run] : kept) runs.push_back(std::move(run));
  return runs;
}

}  // namespace

RunPruneReport prune_runs(CacheRepo& cache, RemoteStore& remote, const RunPruneRequest& request,
                          std::int64_t now) {
  RunPruneReport report;
  const auto refs = map_refs(remote.list("refs/"), report.problems);
  const auto unread = report.problems.size();
  const auto finished = finished_entries(cache, remote, refs, report.problems);
  // Every entry of every index: a file of layout 1's skipped is a run the archive would lose.
  const bool whole = finished.whole && report.problems.size() == unread;
  const auto chosen = runs_to_prune(finished.entries, refs.published, request, now, report);
  if (request.dry_run || chosen.empty()) {
    report.deleted = chosen;
    return report;
  }
  std::vector<RefUpdate> updates;
  for (const auto& id : chosen)
    if (refs.published.contains(id))
      updates.push_back({.ref = result_ref(id), .commit = "", .from = {}});
  const auto& tip = finished.flat_tip;
  std::optional<std::size_t> flat_at, log_at;
  if (const auto index = tip.empty() ? std::nullopt : index_without(cache, tip, chosen)) {
    flat_at = updates.size();
    updates.push_back({.ref = std::string(kIndexRef), .commit = *index, .from = tip});
  }
  // Layout 2's log takes a removal line for each id it lists. A snapshot without a log is no
  // index this code writes: nothing starts one.
  std::string removals;
  for (const auto& id : chosen)
    if (refs.runs_log && finished.logged.contains(id)) removals += write_removal_line(id);
  if (!removals.empty()) {
    log_at = updates.size();
    updates.push_back(runs_log_delta(std::move(removals)));
  }
  // Layout 2's archive keeps every folded result reachable, a pruned one too, until it is built
  // again without them, from the indexes: only from whole ones, since a run left out of it may
  // have no other ref, and the server's gc would delete its result.
  if (refs.archive && !whole)
    report.problems.push_back(std::string(kArchiveRef) +
                              " still keeps the pruned results: an index was not read whole");
  else if (refs.archive)
    updates.push_back(archive_rebuilt(archive_without(refs, finished, chosen), refs.archive->oid));
  const auto results = remote.update(updates);
  for (std::size_t i = 0; i < updates.size(); ++i)
    if (results[i].outcome != RefOutcome::updated)
      report.failed.push_back(updates[i].ref == kArchiveRef
                                  ? updates[i].ref +
                                        " not rebuilt, so the pruned results stay "
                                        "stored until a later prune: " +
                                        results[i].detail
                                  : updates[i].ref + " not updated: " + results[i].detail);
  const auto landed = [&](std::optional<std::size_t> at) {
    return !at || results[*at].outcome == RefOutcome::updated;
  };
  // A run is pruned once its result is gone and no index that listed it lists it any more.
  for (const auto& id : chosen) {
    const auto result = std::find_if(updates.begin(), updates.end(),
                                     [&](const RefUpdate& u) { return u.ref == result_ref(id); });
    const bool result_gone =
        result == updates.end() ||
        results[static_cast<std::size_t>(result - updates.begin())].outcome == RefOutcome::updated;
    const bool unlisted = (!finished.flat.contains(id) || landed(flat_at)) &&
                          (!finished.logged.contains(id) || landed(log_at));
    if (result_gone && unlisted) report.deleted.push_back(id);
  }
  return report;
}

MigrationReport migrate_runs(CacheRepo& cache, RemoteStore& remote, bool dry_run) {
  MigrationReport report;
  const auto listed = remote.list("refs/", RemoteStore::Tips::flat_index);
  const auto refs = map_refs(listed, report.problems);
  const auto finished = finished_entries(cache, remote, refs, report.problems);
  const auto& results = refs.results;
  std::string lines;
  std::vector<ArchivedRun> runs;
  for (const auto& id : finished.flat) {
    if (finished.logged.contains(id)) continue;
    auto entry = finished.entries.at(id);
    entry.result_commit = std::nullopt;  // what the ref holds, not what a file says
    const auto result = results.find(id);
    if (result != results.end()) entry.result_commit = result->second;
    // Every entry copied gets its publish marker in the archive, with or without a result ref:
    // a lookup finds any run the log lists without a ref there (`inflight run` asks no more).
    // Its result, when it has a ref, is folded only with its status marker: a status written by
    // hand into layout 1's index ("Succeeded") makes none, and its result is left to its ref.
    const bool status_marker = makes_markers(id, entry.final_status);
    if (result != results.end() && !status_marker)
      report.problems.push_back("run " + id + " is not folded: no marker for final status '" +
                                printable(entry.final_status) + "'");
    const bool folds_result = result != results.end() && status_marker;
    report.folded += folds_result;
    runs.push_back({.run_id = id,
                    .result = folds_result ? result->second : "",
                    .final_status = status_marker ? entry.final_status : "",
                    .marked = true});
    lines += write_index_line(entry);
    ++report.copied;
  }
  if (dry_run || report.copied == 0) return report;
  // Every fold lands before the log does: a migration cut short or refused finds the entries
  // still missing from the log next time, and folds them again (a second parent and entry is
  // harmless), where entries in the log would have left their results unfolded for good.
  const auto pushed = [&](RefUpdate update) {
    const auto landed = remote.update({update});
    if (landed[0].outcome != RefOutcome::updated)
      report.failed.push_back(update.ref + ": " + landed[0].detail);
    return report.failed.empty();
  };
  for (std::size_t first = 0; first < runs.size(); first += kRunsFoldedPerPush) {
    const auto at = [&](std::size_t n) {
      return runs.begin() + static_cast<std::ptrdiff_t>(std::min(n, runs.size()));
    };
    if (!pushed(archive_fold({at(first), at(first + kRunsFoldedPerPush)}))) return report;
  }
  pushed(runs_log_delta(std::move(lines)));
  return report;
}

CompactionReport compact_runs(CacheRepo& cache, RemoteStore& remote, bool dry_run) {
  CompactionReport report;
  const auto refs = map_refs(remote.list("refs/"), report.problems);
  if (!refs.runs_log) {
    report.problems.push_back(std::string(kRunsLogRef) + " is not there (layout 1): no log");
    return report;
  }
  // The log alone, however long, each id's last line kept as written: a field this release does
  // not know is a newer pod's, and stays.
  const auto index =
      read_runs_index(cache, std::nullopt, remote.fetch_listed(*refs.runs_log),
                      {.keep_lines = true, .max_commits = std::numeric_limits<std::size_t>::max()});
  report.commits_before = index.log_commits;
  report.entries = index.entries.size();
  report.removals = index.removed.size();  // each wins over a file of inflight-index still
  if (!index.problems.empty()) {
    report.problems.insert(report.problems.end(), index.problems.begin(), index.problems.end());
    report.failed.push_back(std::string(kRunsLogRef) + " not compacted: it was not read whole");
    return report;
  }
  std::string lines;
  for (const auto& [id, line] : index.lines) (lines += line) += '\n';
  report.commits_after = runs_log_deltas(lines);
  if (dry_run || report.commits_after >= report.commits_before) return report;
  const auto result = remote.update({runs_log_compacted(std::move(lines), refs.runs_log->oid)});
  if (result[0].outcome != RefOutcome::updated)
    report.failed.push_back(std::string(kRunsLogRef) +
                            " not compacted (run it again): " + result[0].detail);
  return report;
}

}  // namespace inflight::checkpoint
