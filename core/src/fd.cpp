#include "inflight/core/fd.hpp"

#include <cerrno>
#include <system_error>

namespace inflight {

void write_all(int fd, std::string_view data, const std::string& what) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::system_error(errno, std::generic_category(), "write " + what);
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace inflight
