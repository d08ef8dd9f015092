// Files of a run directory that inflight itself reads or writes: atomic
// writes, torn-line repair, record counts, stat fingerprints.
#include "inflight/core/run_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

#include "inflight/core/fd.hpp"
#include "inflight/core/fnv1a.hpp"

namespace inflight::checkpoint {

namespace {

// Enough of a line's end that a rewrite in place is all but sure to change it.
constexpr std::size_t kTailBytes = 256;

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// The last kTailBytes of what was counted, without copying a whole block.
void keep_tail(std::string& tail, std::string_view block) {
  if (block.size() >= kTailBytes) {
    tail.assign(block.substr(block.size() - kTailBytes));
    return;
  }
  tail.append(block);
  if (tail.size() > kTailBytes) tail.erase(0, tail.size() - kTailBytes);
}

}  // namespace

// memchr is vectorised; std::count over chars is not at -O2, and took four
// times as long over a 200 MB progress file at restore.
std::uint64_t complete_lines(std::string_view text) {
  std::uint64_t lines = 0;
  for (std::size_t at = 0; at < text.size(); ++lines) {
    const void* newline = std::memchr(text.data() + at, '\n', text.size() - at);
    if (newline == nullptr) break;
    at = static_cast<std::size_t>(static_cast<const char*>(newline) - text.data()) + 1;
  }
  return lines;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view content,
                           Durability durability) {
  // native() lends the name instead of copying it; the copy made GCC 12 at
  // -O3 report a false -Wrestrict inside operator+.
  const auto temp = path.parent_path() / ("." + path.filename().native() + ".tmp");
  {
    if (::unlink(temp.c_str()) != 0 && errno != ENOENT) throw_errno("remove " + temp.string());
    Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd) throw_errno("open " + temp.string());
    write_all(fd.get(), content, temp.string());
    if (durability == Durability::synced && ::fsync(fd.get()) != 0)
      throw_errno("fsync " + temp.string());
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) throw_errno("rename " + temp.string());
  if (durability == Durability::atomic) return;
  Fd dir(::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir || ::fsync(dir.get()) != 0) throw_errno("fsync " + path.parent_path().string());
}

Fd open_in_run_dir(const std::filesystem::path& run_dir, const std::filesystem::path& relative,
                   int flags, mode_t mode) {
  Fd dir(::open(run_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  const auto last = relative.filename();
  for (const auto& part : relative.parent_path()) {
    if (!dir) return dir;
    if (part == ".." || part == "/") {
      errno = EINVAL;
      return Fd();
    }
    dir = Fd(::openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  }
  if (!dir) return dir;
  if (last.empty() || last == "..") {
    errno = EINVAL;
    return Fd();
  }
  return Fd(::openat(dir.get(), last.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode));
}

std::uint64_t repair_torn_line(const std::filesystem::path& run_dir,
                               const std::filesystem::path& progress_file) {
  // O_NONBLOCK: a FIFO planted under the name must not hold the caller.
  Fd fd = open_in_run_dir(run_dir, progress_file, O_RDWR | O_NONBLOCK);
  if (!fd) {
    if (errno == ENOENT) return 0;
    throw_errno("open " + progress_file.string());
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_errno("stat " + progress_file.string());
  if (!S_ISREG(st.st_mode)) return 0;
  // Scan backwards for the last newline, one block at a time.
  std::array<char, 4096> block{};
  off_t end = st.st_size;
  while (end > 0) {
    const off_t start = std::max<off_t>(0, end - static_cast<off_t>(block.size()));
    const ssize_t n = ::pread(fd.get(), block.data(), end - start, start);
    if (n != end - start) throw_errno("read " + progress_file.string());
    const auto* hit = static_cast<const char*>(::memrchr(block.data(), '\n', n));
    if (hit != nullptr) {
      end = start + (hit - block.data()) + 1;
      break;
    }
    end = start;
  }
  if (end == st.st_size) return 0;
  if (::ftruncate(fd.get(), end) != 0 || ::fsync(fd.get()) != 0)
    throw_errno("truncate " + progress_file.string());
  return static_cast<std::uint64_t>(st.st_size - end);
}

std::uint64_t stat_signature(const std::filesystem::path& run_dir) {
  Fnv1a hash;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(run_dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const auto name = it->path().string();
    hash.mix(name);
    const std::int64_t fields[] = {st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                                   static_cast<std::int64_t>(st.st_ino)};
    hash.mix(fields, sizeof fields);
  }
  return hash.value();
}

std::uint64_t RecordCounter::count(const std::filesystem::path& run_dir,
                                   const std::filesystem::path& progress_file) {
  const Fd fd = open_in_run_dir(run_dir, progress_file, O_RDONLY | O_NONBLOCK);
  if (!fd) return lines_ = scanned_ = 0;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return lines_ = scanned_ = 0;
  if (!unchanged_so_far(fd.get(), st)) {
    lines_ = scanned_ = 0;
    tail_.clear();
  }
  inode_ = st.st_ino;
  std::array<char, 65536> block{};
  while (scanned_ < st.st_size) {
    const ssize_t n = ::pread(fd.get(), block.data(), block.size(), scanned_);
    if (n <= 0) break;
    const std::string_view read(block.data(), static_cast<std::size_t>(n));
    lines_ += complete_lines(read);
    scanned_ += n;
    keep_tail(tail_, read);
  }
  return lines_;
}

bool RecordCounter::unchanged_so_far(int fd, const struct stat& st) const {
  if (st.st_ino != inode_ || st.st_size < scanned_) return false;
  std::string now(tail_.size(), '\0');
  const off_t at = scanned_ - static_cast<off_t>(tail_.size());
  return ::pread(fd, now.data(), now.size(), at) == static_cast<ssize_t>(now.size()) &&
         now == tail_;
}

}  // namespace inflight::checkpoint
