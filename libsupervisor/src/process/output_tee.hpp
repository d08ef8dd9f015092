// Copies a child's output to its console.log and to our stdout, for commands
// that run a child in the foreground and stream it.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/readable_pipe.hpp>
#include <memory>

#include "inflight/core/fd.hpp"

namespace inflight {

class OutputTee : public std::enable_shared_from_this<OutputTee> {
 public:
  // Reads `pipe_read` until every writer has closed it.
  OutputTee(boost::asio::io_context& io, Fd pipe_read, Fd console);
  void start();

 private:
  boost::asio::readable_pipe pipe_;
  Fd console_;
  std::array<char, 8192> buffer_{};
};

}  // namespace inflight
