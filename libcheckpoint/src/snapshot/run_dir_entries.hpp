// A snapshot opens what it reads of a run dir by descriptor, one name at a
// time, never by a path below the run dir: a child that swaps a directory for
// a symbolic link, or a file for a FIFO, while the walk goes on cannot make
// the agent read through the link or block on the FIFO (docs/checkpoints.md "What a checkpoint
// saves, a restore takes").
#pragma once

#include <dirent.h>
#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "inflight/core/fd.hpp"

namespace inflight::checkpoint {

// One directory of the run dir, open and being listed. `shown` names it in
// errors.
class OpenDir {
 public:
  OpenDir(Fd fd, std::string shown);

  int fd() const { return ::dirfd(dir_.get()); }
  const std::string& shown() const { return shown_; }
  // The next name, "." and ".." skipped; nullopt at the end.
  std::optional<std::string> next_name();

 private:
  struct Closer {
    void operator()(DIR* dir) const { ::closedir(dir); }
  };
  std::unique_ptr<DIR, Closer> dir_;
  std::string shown_;
};

// Thrown by the calls below for an entry whose permissions keep us out (EACCES,
// EPERM): a child can chmod 000 what it made. The message names the entry and
// the error; the snapshot leaves that entry out and goes on.
class EntryUnreadable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The run dir itself, which must be a directory and not a symbolic link.
OpenDir open_run_dir(const std::filesystem::path& run_dir);

// `name` in `dir`, a symbolic link not followed; nullopt when it is gone.
std::optional<struct stat> stat_entry(const OpenDir& dir, const std::string& name);

// Opens `name` in `dir` if it is still the directory `seen` (from
// stat_entry) describes; nullopt when it is gone or was replaced.
std::optional<OpenDir> open_dir_entry(const OpenDir& dir, const std::string& name,
                                      const struct stat& seen);

// Opens `name` in `dir` for reading if it is still the regular file `seen`
// describes; nullopt when it is gone or was replaced (by a FIFO, a link,
// another file). Never blocks.
std::optional<Fd> open_file_entry(const OpenDir& dir, const std::string& name,
                                  const struct stat& seen);

}  // namespace inflight::checkpoint
