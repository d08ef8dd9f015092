#include "inflight/core/fd.hpp"

#include <cerrno>
#include <optional>
#include <system_error>

namespace inflight {

namespace {

// At the descriptor's position, or at `offset` (which then moves on).
void write_loop(int fd, std::string_view data, std::optional<off_t> offset,
                const std::string& what) {
  while (!data.empty()) {
    const ssize_t n = offset ? ::pwrite(fd, data.data(), data.size(), *offset)
                             : ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::system_error(errno, std::generic_category(), "write " + what);
    data.remove_prefix(static_cast<std::size_t>(n));
    if (offset) *offset += n;
  }
}

}  // namespace

void write_all(int fd, std::string_view data, const std::string& what) {
  write_loop(fd, data, std::nullopt, what);
}

void write_all_at(int fd, std::string_view data, off_t offset, const std::string& what) {
  write_loop(fd, data, offset, what);
}

}  // namespace inflight
