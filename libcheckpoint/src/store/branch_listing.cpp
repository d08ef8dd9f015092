#include "inflight/checkpoint/branch_listing.hpp"

#include <algorithm>

#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"
#include "inflight/checkpoint/commit_message.hpp"
#include "inflight/core/bounded_json.hpp"
#include "snapshot/chunked_file.hpp"

namespace inflight::checkpoint {

namespace {

// Deeper trees are not run dirs; the limit also bounds the recursion.
constexpr int kMaxDepth = 64;

class SizeCounter {
 public:
  explicit SizeCounter(git_repository* repo) : repo_(repo), odb_(open_odb(repo)) {}

  std::uint64_t tree(const git_tree* tree, int depth) {
    if (depth > kMaxDepth)
      throw GitError(Failure::hostile_tree,
                     "checkpoint tree nested deeper than " + std::to_string(kMaxDepth));
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < git_tree_entrycount(tree); ++i)
      total += entry(git_tree_entry_byindex(tree, i), depth);
    return total;
  }

 private:
  // A chunked file counts once at its whole size, at the depth of its name.
  // Links and gitlinks are never restored: they weigh 0.
  std::uint64_t entry(const git_tree_entry* entry, int depth) {
    const git_filemode_t mode = git_tree_entry_filemode(entry);
    const std::string name = git_tree_entry_name(entry);
    if (mode == GIT_FILEMODE_TREE && has_chunk_suffix(name)) {
      std::uint64_t total = 0;
      const TreeHandle chunks = lookup_tree(repo_, *git_tree_entry_id(entry));
      for_each_chunk_id(repo_, chunks.get(), name, [&](const git_oid& id, const std::string&) {
        total += blob_size(id, name);
      });
      return total;
    }
    if (mode == GIT_FILEMODE_TREE)
      return tree(lookup_tree(repo_, *git_tree_entry_id(entry)).get(), depth + 1);
    if (mode != GIT_FILEMODE_BLOB && mode != GIT_FILEMODE_BLOB_EXECUTABLE) return 0;
    return blob_size(*git_tree_entry_id(entry), name);
  }

  // The header alone: sizing must not inflate every blob.
  std::size_t blob_size(const git_oid& id, const std::string& name) {
    std::size_t size = 0;
    git_object_t type{};
    git_check(git_odb_read_header(&size, &type, odb_.get(), &id), "read size of " + name);
    return size;
  }

  git_repository* repo_;
  OdbHandle odb_;
};

// The tip's run-params.json, parsed within its limits, or why not.
Result<OrderedJson> run_params_at(CacheRepo& cache, const std::string& commit) {
  const auto problem = [](std::string message) {
    return Error{.kind = Failure::other, .message = std::move(message), .candidates = {}};
  };
  const auto text = read_file_at(cache, commit, kRunParamsFile, kMaxRunParamsBytes);
  if (!text) return problem("the checkpoint has no run-params.json");
  auto json = parse_bounded_json(*text, {.max_bytes = kMaxRunParamsBytes});
  if (!json) return problem("run-params.json: " + json.error().message);
  if (!json->is_object()) return problem("run-params.json is not an object");
  return json;
}

void plan_by_run_id(const std::vector<RemoteBranch>& branches, const PruneRequest& request,
                    PrunePlan& plan) {
  for (const auto& id : request.run_ids) {
    const auto before = plan.refs.size();
    for (const auto& branch : branches)
      if (branch_matches(branch.ref, id) &&
          std::find(plan.refs.begin(), plan.refs.end(), branch.ref) == plan.refs.end())
        plan.refs.push_back(branch.ref);
    if (plan.refs.size() == before) plan.missing_run_ids.push_back(id);
  }
}

void plan_by_age(CacheRepo& cache, RemoteStore& remote, const std::vector<RemoteBranch>& branches,
                 std::int64_t min_age, std::int64_t now, PrunePlan& plan) {
  for (const auto& branch : branches) {
    try {
      const auto tip = commit_summary(cache, remote.fetch_listed(branch));
      if (now - tip.time >= min_age) plan.refs.push_back(branch.ref);
    } catch (const GitError& e) {
      if (e.network()) throw;
      plan.problems.push_back(printable(branch.ref) + ": " + e.what());
    }
  }
}

}  // namespace

CheckpointCommit describe_commit(const CommitSummary& summary) {
  const auto message = parse_checkpoint_message(summary.message);
  return {.oid = summary.oid,
          .time = summary.time,
          .reason = message.reason,
          .attempt = message.attempt.value_or(0),
          .pod = message.pod.value_or(""),
          .records = message.records.value_or(0),
          .total = message.total};
}

bool branch_matches(const std::string& ref, const std::string& id) {
  if (ref == id || ref == std::string(kHeadsPrefix) + id) return true;
  const auto name = parse_branch_ref(ref);
  return name && name->run_id == id;
}

std::uint64_t run_dir_size(CacheRepo& repo, const std::string& commit) {
  git_repository* git = raw_repo(repo);
  const TreeHandle root = tree_of(lookup_commit(git, commit).get());
  return SizeCounter(git).tree(root.get(), 0);
}

BranchSummary summarize_branch(CacheRepo& cache, RemoteStore& remote, const RemoteBranch& branch) {
  const auto name = parse_branch_ref(branch.ref);
  if (!name) throw GitError(Failure::other, "not an inflight/<pod>/<run-id> branch");
  const auto tip = remote.fetch_listed(branch);
  BranchSummary summary{.ref = branch.ref,
                        .name = *name,
                        .tip = describe_commit(commit_summary(cache, tip)),
                        .run_params = run_params_at(cache, tip),
                        .attempts = 0,
                        .size_bytes = run_dir_size(cache, tip)};
  if (summary.run_params) summary.attempts = listed_attempts(*summary.run_params);
  return summary;
}

BranchListing list_branches(CacheRepo& cache, RemoteStore& remote,
                            const std::optional<std::string>& pod) {
  BranchListing listing;
  // One connection lists the branches and downloads every tip.
  for (const auto& branch :
       remote.list(std::string(kBranchPrefix), RemoteStore::Tips::downloaded)) {
    const auto name = parse_branch_ref(branch.ref);
    if (pod && (!name || name->pod != *pod)) continue;
    for_one_ref(branch.ref, listing.problems,
                [&] { listing.branches.push_back(summarize_branch(cache, remote, branch)); });
  }
  return listing;
}

std::vector<RemoteBranch> find_run_branches(RemoteStore& remote, const std::string& id) {
  std::vector<RemoteBranch> found;
  for (auto& branch : remote.list(std::string(kBranchPrefix)))
    if (branch_matches(branch.ref, id)) found.push_back(std::move(branch));
  return found;
}

PrunePlan plan_prune(CacheRepo& cache, RemoteStore& remote, const PruneRequest& request,
                     std::int64_t now) {
  PrunePlan plan;
  plan.listing = remote.list("refs/", RemoteStore::Tips::downloaded);
  std::vector<RemoteBranch> branches;
  for (const auto& ref : plan.listing)
    if (ref.ref.starts_with(kBranchPrefix)) branches.push_back(ref);
  if (request.all) {
    for (const auto& branch : branches) plan.refs.push_back(branch.ref);
  } else if (request.older_than_seconds) {
    plan_by_age(cache, remote, branches, *request.older_than_seconds, now, plan);
  } else {
    plan_by_run_id(branches, request, plan);
  }
  return plan;
}

}  // namespace inflight::checkpoint
