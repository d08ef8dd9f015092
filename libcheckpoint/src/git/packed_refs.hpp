// The cache repo's packed-refs file, which inflight writes for the refs it
// keeps there: refs/inflight-local/<branch>, the tip this pod last pushed to
// each branch. The next save builds on it, and a fetch offers it to the
// server as a commit the cache has. A loose ref is a file of its own (a
// lock, a write, a link, an unlink): a restore of 100 runs made 100 new
// directory entries, up to a millisecond each where the host reclaims the
// disk's page cache. One packed-refs file, rewritten once per step, holds
// them all, and libgit2 reads it as git does.
//
// Format (git's, the subset inflight writes): a header line
// `# pack-refs with: peeled fully-peeled sorted `, then `<40 hex> <ref>`
// lines sorted by ref, each possibly followed by `^<40 hex>` (the commit an
// annotated tag peels to; kept as read, never written by inflight).
#pragma once

#include <git2.h>

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inflight::checkpoint {

struct PackedRef {
  std::string oid;     // 40 hex digits
  std::string peeled;  // empty, or the `^` line's 40 hex digits
};
using PackedRefs = std::map<std::string, PackedRef>;

// Throws std::invalid_argument naming the line that is not the format.
PackedRefs parse_packed_refs(std::string_view text);
std::string write_packed_refs(const PackedRefs& refs);

// Points each ref at its commit in the packed-refs of the bare repository
// `repo` (a zero id removes the ref), keeping its other lines, under a lock of its own (agents of
// one pod share the cache). Loose refs under `fold` (`refs/inflight-local/`, which earlier builds
// wrote one file each) are moved into it first: a loose ref hides its packed line. Throws
// GitError(cache) when the file cannot be read or written.
void pack_refs(const std::filesystem::path& repo,
               const std::vector<std::pair<std::string, git_oid>>& refs, std::string_view fold);

}  // namespace inflight::checkpoint
