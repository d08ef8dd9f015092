// A file descriptor that closes itself: move-only, one owner.
#pragma once

#include <unistd.h>

#include <string>
#include <string_view>
#include <utility>

namespace inflight {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  // Hands the descriptor to a new owner.
  int release() { return std::exchange(fd_, -1); }
  explicit operator bool() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// The one way inflight writes a buffer to a descriptor: short writes and
// EINTR are retried; a failure throws std::system_error naming `what`.
void write_all(int fd, std::string_view data, const std::string& what);
// The same at `offset` (pwrite: the descriptor's position stays), so that
// threads may write parts of one file.
void write_all_at(int fd, std::string_view data, off_t offset, const std::string& what);

}  // namespace inflight
