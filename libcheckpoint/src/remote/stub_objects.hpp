// The objects of a push that builds on the server's commits (RefUpdate::build): layout 2's
// archive and index log grow by commits whose parents are other pods' work, which this cache never
// downloads (the archive reaches every result ever published). libgit2 1.5 pushes only commits
// whose parents it can read, so a stub stands in for each such parent: a parentless commit of an
// empty tree. libgit2 then hides the stub as the server's tip, and sends only the new commits,
// which the build wrote into the push's own memory, never into the cache.
// A stub may name parents too (Stubs): what the server's commit reaches, which libgit2 then hides
// with it. The bytes of a stub do not hash to its id, which the agent allows (GitLibrary turns
// strict hash verification off), and no stub ever reaches the cache or the server: the push packs
// only what the stubs do not reach. Tried first outside the tree: docs/design/history-layout.md
// §0.1.
#pragma once

#include <git2.h>

#include <map>
#include <string>
#include <vector>

#include "git/git_handle.hpp"

namespace inflight::checkpoint {

struct OidLess {
  bool operator()(const git_oid& a, const git_oid& b) const { return git_oid_cmp(&a, &b) < 0; }
};
// Each stub's bytes, by its id: empty for a parentless stub.
using Stubs = std::map<git_oid, std::string, OidLess>;

// The bytes of a stub whose parents are `parents` (hex).
std::string stub_reaching(const std::vector<std::string>& parents);

// A push's own object database: a memory that takes every write, then `cache` (read only), then a
// stub for each id of `stubs` that neither holds. Both must outlive it; `stubs` may grow.
OdbHandle push_objects(git_odb* cache, const Stubs& stubs);

}  // namespace inflight::checkpoint
