// The run dir walked by descriptor: each entry is judged and opened relative
// to its parent's descriptor, and an opened entry must be the one judged.
#include "snapshot/run_dir_entries.hpp"

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "git/git_error.hpp"
#include "inflight/core/bounded_json.hpp"

namespace inflight::checkpoint {

namespace {

// Errors of an open that mean the entry is no longer what was judged: gone,
// a symbolic link (ELOOP), not a directory any more, a socket (ENXIO), or a
// file another process holds a lease on (EWOULDBLOCK, since we never wait).
bool entry_changed(int error) {
  return error == ENOENT || error == ELOOP || error == ENOTDIR || error == ENXIO ||
         error == EWOULDBLOCK;
}

// Throws EntryUnreadable when `error` is a refused permission, else the errno error.
[[noreturn]] void throw_entry_error(int error, const std::string& what, const std::string& path) {
  if (error == EACCES || error == EPERM)
    throw EntryUnreadable(what + " " + printable(path) + ": " + std::strerror(error));
  errno = error;
  throw_errno(what, path);
}

// Opens `name` below `dir` with `flags`, then checks that the descriptor is
// the same inode as `seen` and of `type` (S_IFREG, S_IFDIR).
std::optional<Fd> open_same_entry(const OpenDir& dir, const std::string& name,
                                  const struct stat& seen, int flags, mode_t type) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  Fd fd(::openat(dir.fd(), name.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd) {
    if (entry_changed(errno)) return std::nullopt;
    throw_entry_error(errno, "open", dir.shown() + "/" + name);
  }
  struct stat now {};
  if (::fstat(fd.get(), &now) != 0) throw_errno("stat", dir.shown() + "/" + name);
  if ((now.st_mode & S_IFMT) != type || now.st_dev != seen.st_dev || now.st_ino != seen.st_ino)
    return std::nullopt;
  return fd;
}

}  // namespace

OpenDir::OpenDir(Fd fd, std::string shown) : shown_(std::move(shown)) {
  dir_.reset(::fdopendir(fd.get()));
  if (!dir_) throw_errno("list", shown_);
  fd.release();  // the DIR closes it now
}

std::optional<std::string> OpenDir::next_name() {
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(dir_.get());
    if (entry == nullptr) {
      if (errno != 0) throw_errno("list", shown_);
      return std::nullopt;
    }
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") return std::string(name);
  }
}

OpenDir open_run_dir(const std::filesystem::path& run_dir) {
  Fd fd(::open(run_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) throw_errno("open", run_dir.string());
  return OpenDir(std::move(fd), run_dir.string());
}

std::optional<struct stat> stat_entry(const OpenDir& dir, const std::string& name) {
  struct stat st {};
  if (::fstatat(dir.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return st;
  if (errno == ENOENT) return std::nullopt;  // deleted since the directory was listed
  throw_entry_error(errno, "stat", dir.shown() + "/" + name);
}

std::optional<OpenDir> open_dir_entry(const OpenDir& dir, const std::string& name,
                                      const struct stat& seen) {
  auto fd = open_same_entry(dir, name, seen, O_RDONLY | O_DIRECTORY, S_IFDIR);
  if (!fd) return std::nullopt;
  return OpenDir(std::move(*fd), dir.shown() + "/" + name);
}

std::optional<Fd> open_file_entry(const OpenDir& dir, const std::string& name,
                                  const struct stat& seen) {
  return open_same_entry(dir, name, seen, O_RDONLY, S_IFREG);
}

}  // namespace inflight::checkpoint
