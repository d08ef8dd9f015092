#include "snapshot/tree_validation.hpp"

#include <set>

#include "git/git_error.hpp"
#include "git/git_handle.hpp"
#include "git/repo_objects.hpp"
#include "inflight/checkpoint/git_store.hpp"
#include "inflight/checkpoint/tree_rules.hpp"
#include "inflight/core/bounded_json.hpp"
#include "snapshot/chunked_file.hpp"

namespace inflight::checkpoint {

namespace {

[[noreturn]] void refuse(const std::string& path, const std::string& rule) {
  throw GitError(Failure::hostile_tree,
                 "refusing checkpoint entry '" + printable(path) + "': " + rule);
}

void check_name(std::string_view name, const std::string& path) {
  if (auto rule = name_refusal(name)) refuse(path, *rule);
}

EntryKind entry_kind(git_filemode_t mode) {
  switch (mode) {
    case GIT_FILEMODE_BLOB:
    case GIT_FILEMODE_BLOB_EXECUTABLE:
      return EntryKind::file;
    case GIT_FILEMODE_TREE:
      return EntryKind::directory;
    case GIT_FILEMODE_LINK:
      return EntryKind::symlink;
    case GIT_FILEMODE_COMMIT:
      return EntryKind::gitlink;
    default:
      return EntryKind::other;
  }
}

class TreeValidator {
 public:
  TreeValidator(git_repository* repo, const TreeLimits& limits)
      : repo_(repo), tally_(limits), odb_(open_odb(repo)) {}

  void directory(const git_tree* tree, const std::string& prefix, int depth) {
    if (auto rule = depth_refusal(depth)) refuse(prefix, *rule);
    std::set<std::string> targets;
    for (std::size_t i = 0; i < git_tree_entrycount(tree); ++i) {
      const git_tree_entry* entry = git_tree_entry_byindex(tree, i);
      const std::string path = prefix + git_tree_entry_name(entry);
      tally_.add_entry();
      if (auto rule = tally_.over_limit()) refuse(path, *rule);
      // The name written, not the entry's: a chunk tree's name is its file's
      // with an ASCII suffix, and may be longer than a file name.
      const std::string target = target_name(entry);
      check_name(target, path);
      if (!targets.insert(target).second) refuse(path, "two entries write the same file");
      entry_of_mode(entry, path, depth);
    }
  }

 private:
  void entry_of_mode(const git_tree_entry* entry, const std::string& path, int depth) {
    const EntryKind kind = entry_kind(git_tree_entry_filemode(entry));
    if (auto rule = kind_refusal(kind)) refuse(path, *rule);
    if (kind == EntryKind::directory) return subtree(entry, path, depth);
    blob(*git_tree_entry_id(entry), path);
  }

  void subtree(const git_tree_entry* entry, const std::string& path, int depth) {
    require_type(*git_tree_entry_id(entry), GIT_OBJECT_TREE, path);
    const TreeHandle tree = lookup_tree(repo_, *git_tree_entry_id(entry));
    if (has_chunk_suffix(git_tree_entry_name(entry))) return chunks(tree.get(), path);
    directory(tree.get(), path + "/", depth + 1);
  }

  void chunks(const git_tree* tree, const std::string& path) {
    // An empty chunk adds work and no bytes: none is ever written.
    for_each_chunk_id(repo_, tree, path, [&](const git_oid& id, const std::string& chunk) {
      if (blob(id, path + "/" + chunk) == 0) refuse(path + "/" + chunk, "empty chunk");
    });
  }

  std::size_t blob(const git_oid& oid, const std::string& path) {
    const std::size_t size = require_type(oid, GIT_OBJECT_BLOB, path);
    tally_.add_bytes(size);
    if (auto rule = tally_.over_limit()) refuse(path, *rule);
    return size;
  }

  std::size_t require_type(const git_oid& oid, git_object_t type, const std::string& path) {
    std::size_t size = 0;
    git_object_t actual = GIT_OBJECT_INVALID;
    git_check(git_odb_read_header(&size, &actual, odb_.get(), &oid), "read " + path);
    if (actual != type) refuse(path, "mode does not match object type");
    return size;
  }

  git_repository* repo_;
  TreeTally tally_;
  OdbHandle odb_;
};

}  // namespace

std::string target_name(const git_tree_entry* entry) {
  const std::string_view name = git_tree_entry_name(entry);
  if (git_tree_entry_filemode(entry) == GIT_FILEMODE_TREE && has_chunk_suffix(name)) {
    return std::string(name.substr(0, name.size() - kChunkSuffix.size()));
  }
  return std::string(name);
}

void validate_run_tree(git_repository* repo, const git_tree* tree, const TreeLimits& limits) {
  TreeValidator(repo, limits).directory(tree, "", 0);
}

ValidatedCommit::ValidatedCommit(git_repository* repo, std::string commit, const TreeLimits& limits)
    : commit_(std::move(commit)) {
  validate_run_tree(repo, tree_of(lookup_commit(repo, commit_).get()).get(), limits);
}

}  // namespace inflight::checkpoint
