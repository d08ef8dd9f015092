// Agents of one pod share the cache repository. libgit2's fetch reads every
// ref of the cache to negotiate, and fails ("object not found") on a ref
// that names an object not on disk. Pushes send from sources held in memory
// (push_sources.hpp) and move refs/inflight-local (packed_refs.hpp) only
// once their objects are kept, so no such ref is made now; the lock guards
// caches that older releases left with loose push tags, and keeps a fetch
// from reading a push's refs half-written. Pushes hold it exclusively and
// fetches shared.
// flock(2): the kernel drops it when an agent dies (killed at its
// deadline), so a lock is never left behind.
#pragma once

#include <filesystem>
#include <string_view>

#include "inflight/core/fd.hpp"

namespace inflight::checkpoint {

class CacheLock {
 public:
  enum class Mode { shared, exclusive };

  // Waits for the lock; the caller's deadline bounds the wait (the agent is
  // killed at it). Throws GitError (cache) when the lock file cannot be used.
  // Another `file` is another lock (packed_refs.hpp has its own).
  CacheLock(const std::filesystem::path& cache, Mode mode,
            std::string_view file = "inflight-refs.lock");

 private:
  Fd fd_;
};

}  // namespace inflight::checkpoint
