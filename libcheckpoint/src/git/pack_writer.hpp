// An object-database backend that only writes packs: it indexes each pack
// itself as it arrives (pack_indexer.hpp) and hands the packs that
// index gives up on, from their first byte, to the backend libgit2 would
// have used without it, the packed one. Fetches and the cache's own packs
// both go through it.
#pragma once

#include <git2.h>

#include <string>
#include <vector>

namespace inflight::checkpoint {

// Why each pack since the last look went to libgit2's indexer, in order: an
// operator chasing a slow restore wants to know.
struct PackHandovers {
  std::vector<std::string> reasons;
};

// Adds the writer to `repo`'s object database, which owns it from then on, and
// its record of handovers with it.
PackHandovers& add_pack_writer(git_repository* repo);

}  // namespace inflight::checkpoint
