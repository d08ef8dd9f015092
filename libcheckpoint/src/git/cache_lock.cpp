// See cache_lock.hpp.
#include "git/cache_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>
#include <cstring>

#include "inflight/checkpoint/git_store.hpp"

namespace inflight::checkpoint {

CacheLock::CacheLock(const std::filesystem::path& cache, Mode mode, std::string_view file) {
  const auto path = cache / file;
  fd_ = Fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd_) throw GitError(Failure::cache, "open " + path.string() + ": " + std::strerror(errno));
  const int operation = mode == Mode::exclusive ? LOCK_EX : LOCK_SH;
  while (::flock(fd_.get(), operation) != 0)
    if (errno != EINTR)
      throw GitError(Failure::cache, "lock " + path.string() + ": " + std::strerror(errno));
}

}  // namespace inflight::checkpoint
