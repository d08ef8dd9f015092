// Files of a run directory that inflight itself reads or writes.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "inflight/core/fd.hpp"

namespace inflight::checkpoint {

enum class Durability {
  synced,  // fsync the file and its directory before returning
  atomic,  // rename only: a crash may keep the old content, never a mix
};

// Temp file beside the target, renamed over it: a reader sees the old or the
// new content, never a mix. A symlink planted at the temp name is replaced,
// never written through.
void write_file_atomically(const std::filesystem::path& path, std::string_view content,
                           Durability durability = Durability::synced);

// Opens `relative` (no `..`, not absolute) inside run_dir without following a
// symlink at any component, so a link planted in a run dir cannot lead out
// of it. An invalid Fd, with errno set, when that fails.
Fd open_in_run_dir(const std::filesystem::path& run_dir, const std::filesystem::path& relative,
                   int flags, mode_t mode = 0);

// Drops a last line of the progress file that lacks its newline (a record
// torn by a kill); returns how many bytes were dropped.
std::uint64_t repair_torn_line(const std::filesystem::path& run_dir,
                               const std::filesystem::path& progress_file);

// A fingerprint of the run dir's metadata (names, sizes, mtimes, inodes of
// its regular files): equal fingerprints mean nothing to checkpoint, found
// without reading any file's content.
std::uint64_t stat_signature(const std::filesystem::path& run_dir);

// Complete lines (records) of a progress file's content: its newlines.
std::uint64_t complete_lines(std::string_view text);

// Counts complete lines of the progress file, reading only what was appended
// since the last call. Tools also rewrite the file in place (agentv: same
// inode, truncated, longer lines), so a rewrite is told by more than the
// size: another inode, or the last bytes counted no longer where they were,
// and then the file is counted afresh.
class RecordCounter {
 public:
  std::uint64_t count(const std::filesystem::path& run_dir,
                      const std::filesystem::path& progress_file);

 private:
  bool unchanged_so_far(int fd, const struct stat& st) const;

  off_t scanned_ = 0;
  std::uint64_t lines_ = 0;
  ino_t inode_ = 0;
  std::string tail_;  // the last bytes counted, up to kTailBytes
};

}  // namespace inflight::checkpoint
