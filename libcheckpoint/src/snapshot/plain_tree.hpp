// A published result holds the run dir as a person reads it (docs/results.md "The result and the
// index"): each chunked file of a checkpoint tree joined back into one blob under its own name, so
// that `git show` of a result works.
#pragma once

#include <git2.h>

#include "inflight/checkpoint/git_store.hpp"

namespace inflight::checkpoint {

// The tree of `tree` with every `<name>.inflight-chunks` tree replaced by the
// blob `<name>` of its chunks' bytes, held by the cache until it persists it.
// The tree must have passed validate_run_tree(): its limits bound the bytes.
git_oid plain_tree(CacheRepo& cache, const git_tree* tree);

}  // namespace inflight::checkpoint
