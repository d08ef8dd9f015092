// Lookups that every reader of the cache repo needs, failing with a GitError
// that names the object.
#pragma once

#include <string>

#include "git_handle.hpp"
#include "inflight/checkpoint/git_store.hpp"

namespace inflight::checkpoint {

CommitHandle lookup_commit(git_repository* repo, const git_oid& oid);
CommitHandle lookup_commit(git_repository* repo, const std::string& hex);
TreeHandle tree_of(const git_commit* commit);
TreeHandle lookup_tree(git_repository* repo, const git_oid& oid);
git_oid empty_tree(git_repository* repo);
OdbHandle open_odb(git_repository* repo);
// A commit by "inflight" of `tree`, with `parent` (may be null) as its only
// parent, held by the cache until it persists it.
git_oid write_commit(CacheRepo& cache, const git_oid& tree, const git_commit* parent,
                     const std::string& message);

}  // namespace inflight::checkpoint
