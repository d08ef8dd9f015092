// The rules a checkpoint tree must meet before a byte of it is written to
// disk: branches are untrusted input (docs/checkpoints.md "What a checkpoint saves, a restore
// takes").
#pragma once

#include <git2.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "inflight/checkpoint/git_store.hpp"

namespace inflight::checkpoint {

// The file name an entry is written under: a chunk tree's name without its
// suffix, anything else unchanged.
std::string target_name(const git_tree_entry* entry);

// Walks the whole tree of a checkpoint before anything is written and throws
// GitError(hostile_tree), naming the path and the rule, when an entry breaks
// a rule of tree_rules.hpp (bad names, names that are not UTF-8, symlinks,
// gitlinks, too deep), two entries would write the same file, or the tree is
// over its limits of bytes and files. The snapshot applies the same rules.
void validate_run_tree(git_repository* repo, const git_tree* tree, const TreeLimits& limits);

// A commit whose tree validate_run_tree() accepted: what the restore's writers
// take, so that a tree is written only once checked, and checked only once.
class ValidatedCommit {
 public:
  // Validates the tree of `commit` in `repo`; throws as validate_run_tree().
  ValidatedCommit(git_repository* repo, std::string commit, const TreeLimits& limits);
  const std::string& commit() const { return commit_; }

 private:
  std::string commit_;
};

}  // namespace inflight::checkpoint
