// Agents of one pod share the cache repository. A push sends its commits
// from tags that name objects only the pushing process holds (in memory);
// libgit2's fetch over the smart protocol resolves those tags, so another
// agent's fetch fails ("object not found") while a push is under way. Pushes
// hold this lock exclusively and fetches shared, so neither sees the other
// half-done. flock(2): the kernel drops it when an agent dies (killed at its
// deadline), so a lock is never left behind.
#pragma once

#include <filesystem>

#include "inflight/fd.hpp"

namespace inflight::checkpoint {

class CacheLock {
 public:
  enum class Mode { shared, exclusive };

  // Waits for the lock; the caller's deadline bounds the wait (the agent is
  // killed at it). Throws GitError (cache) when the lock file cannot be used.
  CacheLock(const std::filesystem::path& cache, Mode mode);

 private:
  Fd fd_;
};

}  // namespace inflight::checkpoint
