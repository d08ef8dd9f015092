// Lookups that every reader of the cache repo needs, failing with a GitError
// that names the object.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "git/git_handle.hpp"
#include "inflight/checkpoint/git_store.hpp"

namespace inflight::checkpoint {

CommitHandle lookup_commit(git_repository* repo, const git_oid& oid);
CommitHandle lookup_commit(git_repository* repo, const std::string& hex);
TreeHandle tree_of(const git_commit* commit);
TreeHandle lookup_tree(git_repository* repo, const git_oid& oid);
git_oid empty_tree(git_repository* repo);
OdbHandle open_odb(git_repository* repo);
// Hashes `data` as an object of `type` and, unless the cache has it, holds it
// in memory until the cache persists it. Cheaper than git_odb_write(), which
// touches (or fails to touch) the object's file on disk and rescans the pack
// dir for every new object: about ten syscalls each.
git_oid write_object(CacheRepo& cache, const void* data, std::size_t size, git_object_t type);
// A commit by "inflight" of `tree`, with `parent` (may be null) as its only
// parent, held by the cache until it persists it; made now, or `at` (seconds
// since the epoch) for a commit that must come out the same each time.
git_oid write_commit(CacheRepo& cache, const git_oid& tree, const git_commit* parent,
                     const std::string& message, std::optional<git_time_t> at = std::nullopt);
// The bytes of a commit by "inflight" of `tree` on `parents` (ids as hex) at `time` (seconds since
// the epoch, UTC), as git writes them: the markers and stubs of layout 2, whose bytes are fixed,
// and the commits a push builds on the server's.
std::string commit_bytes(std::string_view tree, const std::vector<std::string>& parents,
                         std::int64_t time, std::string_view message);
// A commit by "inflight" of `tree` on `parents` (hex ids), made now, written to `repo`'s object
// database without reading its parents: the server's commits that a RefUpdate::build names, which
// the cache need not hold. `repo` is a push's own (PushSources::git()), never the cache's.
git_oid write_commit_on(git_repository* repo, const git_oid& tree,
                        const std::vector<std::string>& parents, const std::string& message);
// `commit` again, with `second` as its second parent: the same tree and
// first-parent history, now a fast-forward of `second`.
std::string merge_onto(CacheRepo& cache, const std::string& commit, const std::string& second);
// A checkpoint commit of `parent`'s own tree on top of it: the claim of a
// run dir materialised from `parent`, which a snapshot would hash back to
// the same tree.
std::string commit_on_own_tree(CacheRepo& cache, const std::string& parent,
                               const CheckpointInfo& info);

}  // namespace inflight::checkpoint
