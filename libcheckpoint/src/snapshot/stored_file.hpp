// One regular file of a run dir as the snapshotter last stored it. The stat
// fields decide whether the file must be read again.
#pragma once

#include <git2.h>
#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <vector>

#include "inflight/checkpoint/git_store.hpp"
#include "inflight/core/fd.hpp"

namespace inflight::checkpoint {

struct FileStat {
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;
  std::uint64_t inode = 0;
  std::uint32_t mode = 0;
  bool operator==(const FileStat&) const = default;
};

FileStat file_stat_of(const struct stat& st);

struct StoredFile {
  FileStat stat;  // as seen before reading; size = bytes actually stored
  git_oid entry;  // the blob, or the chunk tree when `chunks` is non-empty
  std::vector<git_oid> chunks;

  bool executable() const { return (stat.mode & S_IXUSR) != 0; }
  bool chunked() const { return !chunks.empty(); }
};

// Stores the file open as `fd` (stat'ed as `seen`; `relative` names it in
// errors). When `previous` is the same
// inode, chunked and no longer than now, the file is taken to have grown by
// appending: its full chunks are reused and reading starts at the first
// partial chunk.
StoredFile store_file(CacheRepo& cache, Fd fd, const std::string& relative, const FileStat& seen,
                      const StoredFile* previous, SnapshotStats& stats);

}  // namespace inflight::checkpoint
