#include "snapshot/tree_validation.hpp"

#include <cctype>
#include <set>

#include "git/git_error.hpp"
#include "git/git_handle.hpp"
#include "git/repo_objects.hpp"
#include "inflight/checkpoint/git_store.hpp"
#include "inflight/core/bounded_json.hpp"
#include "snapshot/chunked_file.hpp"

namespace inflight::checkpoint {

namespace {

// Deeper trees are not run dirs; the limit also bounds the recursion.
constexpr int kMaxDepth = 64;

[[noreturn]] void refuse(const std::string& path, const std::string& rule) {
  throw GitError(Failure::hostile_tree,
                 "refusing checkpoint entry '" + printable(path) + "': " + rule);
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
  }
  return true;
}

// A NUL cannot occur: the tree format ends every name with one.
void check_name(std::string_view name, const std::string& path) {
  if (name.empty() || name == "." || name == "..") refuse(path, "empty, '.' or '..' name");
  if (name.find('/') != std::string_view::npos) refuse(path, "name contains '/'");
  if (equals_ignoring_case(name, ".git")) refuse(path, "'.git' component");
  if (!is_valid_utf8(name)) refuse(path, "name is not UTF-8");
}

class TreeValidator {
 public:
  TreeValidator(git_repository* repo, const TreeLimits& limits)
      : repo_(repo), limits_(limits), odb_(open_odb(repo)) {}

  void directory(const git_tree* tree, const std::string& prefix, int depth) {
    if (depth > kMaxDepth) refuse(prefix, "nested deeper than " + std::to_string(kMaxDepth));
    std::set<std::string> targets;
    for (std::size_t i = 0; i < git_tree_entrycount(tree); ++i) {
      const git_tree_entry* entry = git_tree_entry_byindex(tree, i);
      const std::string path = prefix + git_tree_entry_name(entry);
      if (++entries_ > limits_.max_files)
        refuse(path, "checkpoint has more than " + std::to_string(limits_.max_files) + " files");
      check_name(git_tree_entry_name(entry), path);
      const std::string target = target_name(entry);
      check_name(target, path);
      if (!targets.insert(target).second) refuse(path, "two entries write the same file");
      entry_of_mode(entry, path, depth);
    }
  }

 private:
  void entry_of_mode(const git_tree_entry* entry, const std::string& path, int depth) {
    switch (git_tree_entry_filemode(entry)) {
      case GIT_FILEMODE_BLOB:
      case GIT_FILEMODE_BLOB_EXECUTABLE:
        return blob(*git_tree_entry_id(entry), path);
      case GIT_FILEMODE_TREE:
        return subtree(entry, path, depth);
      case GIT_FILEMODE_LINK:
        refuse(path, "symbolic link");
      case GIT_FILEMODE_COMMIT:
        refuse(path, "gitlink (submodule)");
      default:
        refuse(path, "unsupported file mode");
    }
  }

  void subtree(const git_tree_entry* entry, const std::string& path, int depth) {
    require_type(*git_tree_entry_id(entry), GIT_OBJECT_TREE, path);
    const TreeHandle tree = lookup_tree(repo_, *git_tree_entry_id(entry));
    if (has_chunk_suffix(git_tree_entry_name(entry))) return chunks(tree.get(), path);
    directory(tree.get(), path + "/", depth + 1);
  }

  void chunks(const git_tree* tree, const std::string& path) {
    for (std::size_t i = 0; i < git_tree_entrycount(tree); ++i) {
      const git_tree_entry* entry = git_tree_entry_byindex(tree, i);
      if (git_tree_entry_filemode(entry) != GIT_FILEMODE_BLOB ||
          git_tree_entry_name(entry) != chunk_name(i)) {
        refuse(path + "/" + git_tree_entry_name(entry), "not chunk blob " + chunk_name(i));
      }
      blob(*git_tree_entry_id(entry), path + "/" + git_tree_entry_name(entry));
    }
  }

  void blob(const git_oid& oid, const std::string& path) {
    const std::size_t size = require_type(oid, GIT_OBJECT_BLOB, path);
    total_ += size;
    if (total_ > limits_.max_bytes) {
      refuse(path, "checkpoint is larger than the limit of " + std::to_string(limits_.max_bytes) +
                       " bytes");
    }
  }

  std::size_t require_type(const git_oid& oid, git_object_t type, const std::string& path) {
    std::size_t size = 0;
    git_object_t actual = GIT_OBJECT_INVALID;
    git_check(git_odb_read_header(&size, &actual, odb_.get(), &oid), "read " + path);
    if (actual != type) refuse(path, "mode does not match object type");
    return size;
  }

  git_repository* repo_;
  TreeLimits limits_;
  OdbHandle odb_;
  std::uint64_t total_ = 0;
  std::uint64_t entries_ = 0;
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

}  // namespace inflight::checkpoint
