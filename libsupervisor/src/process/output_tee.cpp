#include "process/output_tee.hpp"

#include <unistd.h>

namespace inflight {

namespace {

// Unlike core's write_all, gives up silently: a closed stdout must not stop
// the copy to console.log.
void write_best_effort(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n <= 0) return;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

}  // namespace

OutputTee::OutputTee(boost::asio::io_context& io, Fd pipe_read, Fd console)
    : pipe_(io, pipe_read.release()), console_(std::move(console)) {}

void OutputTee::start() {
  pipe_.async_read_some(boost::asio::buffer(buffer_),
                        [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
                          if (ec) return;
                          write_best_effort(self->console_.get(), self->buffer_.data(), n);
                          write_best_effort(STDOUT_FILENO, self->buffer_.data(), n);
                          self->start();
                        });
}

}  // namespace inflight
