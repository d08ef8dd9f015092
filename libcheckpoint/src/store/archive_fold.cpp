// See archive_fold.hpp.
#include "store/archive_fold.hpp"

#include <charconv>
#include <set>
#include <span>
#include <stdexcept>

#include "git/git_error.hpp"
#include "git/git_handle.hpp"
#include "git/markers.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"
#include "inflight/core/branch_name.hpp"
#include "remote/push_sources.hpp"

namespace inflight::checkpoint {

std::string fold_record(std::string_view run_id) {
  return std::string(kFoldRecordPrefix) + std::string(run_id);
}

std::string folded_record(std::string_view run_id, std::int64_t unix_seconds) {
  return std::string(kFoldedRecordPrefix) + std::to_string(unix_seconds) + "/" +
         std::string(run_id);
}

std::optional<FoldedRecord> parse_folded_record(std::string_view ref) {
  if (!ref.starts_with(kFoldedRecordPrefix)) return std::nullopt;
  ref.remove_prefix(kFoldedRecordPrefix.size());
  const auto slash = ref.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  FoldedRecord record{.run_id = std::string(ref.substr(slash + 1)), .unix_seconds = 0};
  const auto seconds = ref.substr(0, slash);
  const auto [end, error] =
      std::from_chars(seconds.data(), seconds.data() + seconds.size(), record.unix_seconds);
  if (error != std::errc() || end != seconds.data() + seconds.size() ||
      !is_valid_run_id(record.run_id))
    return std::nullopt;
  return record;
}

namespace {

// A fold's tree: K, then each run's id, as a directory, holding S(id, status), else M(id). A run
// named twice keeps its first entry (a tree names each entry once).
git_oid fold_tree(git_repository* git, std::span<const ArchivedRun> runs) {
  git_treebuilder* raw = nullptr;
  git_check(git_treebuilder_new(&raw, git, nullptr), "start a fold's tree");
  const TreeBuilderHandle tree(raw);
  const git_oid known = write_marker(git, archive_known());
  git_check(git_treebuilder_insert(nullptr, tree.get(), std::string(kArchiveKnownEntry).c_str(),
                                   &known, GIT_FILEMODE_TREE),
            "add the archive's known marker to a fold");
  for (const auto& run : runs) {
    if (!run.marked || git_treebuilder_get(tree.get(), run.run_id.c_str()) != nullptr) continue;
    git_oid marker = write_marker(git, published_marker(run.run_id));
    if (!run.final_status.empty())
      marker = write_marker(git, status_marker(run.run_id, run.final_status));
    git_check(
        git_treebuilder_insert(nullptr, tree.get(), run.run_id.c_str(), &marker, GIT_FILEMODE_TREE),
        "add run " + run.run_id + " to a fold");
  }
  git_oid oid;
  git_check(git_treebuilder_write(&oid, tree.get()), "write a fold's tree");
  return oid;
}

// The chain of folds of `runs`, kRunsPerFold to a commit, on `tip` (on a new genesis where it is
// empty), built in the push's own objects; its last commit. One fold at least, even of no run:
// lookups need the marker K that each fold holds.
std::string fold_chain(const std::vector<ArchivedRun>& runs, const std::string& tip,
                       PushSources& objects) {
  git_repository* git = objects.git();
  std::string parent = tip.empty() ? oid_hex(write_marker(git, archive_genesis())) : tip;
  std::size_t first = 0;
  do {
    const auto end = std::min(runs.size(), first + kRunsPerFold);
    std::vector<std::string> parents{parent};
    for (std::size_t i = first; i < end; ++i) {
      if (runs[i].result.empty()) continue;
      // A result this cache lacks is the server's (a migration folds every pod's).
      objects.stub(parse_oid(runs[i].result));
      parents.push_back(runs[i].result);
    }
    const auto tree = fold_tree(git, std::span(runs).subspan(first, end - first));
    parent = oid_hex(write_commit_on(
        git, tree, parents, "inflight archive: " + std::to_string(end - first) + " runs\n"));
    first = end;
  } while (first < runs.size());
  return parent;
}

}  // namespace

RefUpdate archive_fold(std::vector<ArchivedRun> runs) {
  if (runs.empty() || runs.size() > kRunsFoldedPerPush)
    throw std::invalid_argument("a fold of " + std::to_string(runs.size()) + " runs");
  return {.ref = std::string(kArchiveRef),
          .commit = "",
          .from = std::nullopt,
          .build = [runs = std::move(runs)](const std::string& tip, PushSources& objects) {
            return fold_chain(runs, tip, objects);
          }};
}

RefUpdate archive_rebuilt(std::vector<ArchivedRun> runs, std::string tip) {
  return {.ref = std::string(kArchiveRef),
          .commit = "",
          .from = std::move(tip),
          .build = [runs = std::move(runs)](const std::string& tip, PushSources& objects) {
            // The tip reaches every result folded: hidden with it, those the new archive keeps
            // are not sent again (a result the cache lacks would go as a stub's bytes).
            std::set<std::string> results;
            for (const auto& run : runs)
              if (!run.result.empty()) results.insert(run.result);
            if (!tip.empty()) objects.stub(parse_oid(tip), {results.begin(), results.end()});
            return fold_chain(runs, "", objects);
          }};
}

}  // namespace inflight::checkpoint
