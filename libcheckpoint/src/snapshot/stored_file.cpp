// A run dir's regular file read into the cache repo: one blob, or a tree of
// chunks that reuses the chunks an append left as they were.
#include "snapshot/stored_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/repo_objects.hpp"
#include "snapshot/chunked_file.hpp"

namespace inflight::checkpoint {

namespace {

std::int64_t nanoseconds(const struct timespec& ts) {
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// A file opened by the walk (run_dir_entries.hpp); `shown` names it in errors.
class ReadOnlyFile {
 public:
  ReadOnlyFile(Fd fd, std::string shown) : shown_(std::move(shown)), fd_(std::move(fd)) {}

  // Reads up to `size` bytes at `offset`; fewer only at end of file.
  std::size_t read_at(char* buffer, std::size_t size, std::uint64_t offset) const {
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n =
          ::pread(fd_.get(), buffer + done, size - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("read");
      if (n == 0) break;
      done += static_cast<std::size_t>(n);
    }
    return done;
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    const int error = errno;
    throw GitError(Failure::other,
                   std::string(what) + " " + printable(shown_) + ": " + std::strerror(error));
  }

  std::string shown_;
  Fd fd_;
};

git_oid write_blob(CacheRepo& cache, const char* data, std::size_t size) {
  return write_object(cache, data, size, GIT_OBJECT_BLOB);
}

StoredFile store_whole(CacheRepo& cache, const ReadOnlyFile& file, const FileStat& seen,
                       SnapshotStats& stats) {
  std::string content(seen.size, '\0');
  const std::size_t got = file.read_at(content.data(), content.size(), 0);
  stats.bytes_read += got;
  StoredFile stored{seen, write_blob(cache, content.data(), got), {}};
  stored.stat.size = got;
  return stored;
}

std::size_t reusable_chunks(const FileStat& seen, const StoredFile* previous) {
  if (previous == nullptr || !previous->chunked() || previous->stat.inode != seen.inode ||
      previous->stat.size > seen.size) {
    return 0;
  }
  return static_cast<std::size_t>(previous->stat.size / kChunkSize);
}

StoredFile store_chunked(CacheRepo& cache, const ReadOnlyFile& file, const FileStat& seen,
                         const StoredFile* previous, SnapshotStats& stats) {
  const std::size_t kept = reusable_chunks(seen, previous);
  StoredFile stored{seen, {}, {}};
  if (kept > 0) stored.chunks.assign(previous->chunks.begin(), previous->chunks.begin() + kept);
  std::uint64_t offset = kept * kChunkSize;
  std::string buffer(kChunkSize, '\0');
  while (offset < seen.size) {
    if (stored.chunks.size() == kMaxChunks) {
      throw GitError(Failure::other, "file too large to checkpoint");
    }
    const std::size_t want = static_cast<std::size_t>(std::min(kChunkSize, seen.size - offset));
    const std::size_t got = file.read_at(buffer.data(), want, offset);
    stats.bytes_read += got;
    if (got == 0) break;
    stored.chunks.push_back(write_blob(cache, buffer.data(), got));
    offset += got;
    if (got < want) break;
  }
  stored.stat.size = offset;
  stored.entry = write_chunk_tree(raw_repo(cache), stored.chunks);
  return stored;
}

}  // namespace

FileStat file_stat_of(const struct stat& st) {
  return FileStat{static_cast<std::uint64_t>(st.st_size), nanoseconds(st.st_mtim),
                  nanoseconds(st.st_ctim), static_cast<std::uint64_t>(st.st_ino),
                  static_cast<std::uint32_t>(st.st_mode)};
}

StoredFile store_file(CacheRepo& cache, Fd fd, const std::string& relative, const FileStat& seen,
                      const StoredFile* previous, SnapshotStats& stats) {
  const ReadOnlyFile file(std::move(fd), relative);
  ++stats.files_read;
  if (seen.size <= kChunkThreshold) return store_whole(cache, file, seen, stats);
  return store_chunked(cache, file, seen, previous, stats);
}

}  // namespace inflight::checkpoint
