#include "inflight/supervisor/process/event_loop.hpp"

#include <pthread.h>

#include <boost/asio/post.hpp>
#include <csignal>
#include <exception>

#include "inflight/core/log.hpp"

namespace inflight {

namespace {

void block_stop_signals() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &stop, nullptr);
}

}  // namespace

void run_event_loop(boost::asio::io_context& io) {
  const log::Batch batch([&io] { boost::asio::post(io, log::flush); });
  for (;;) {
    try {
      io.run();
      return block_stop_signals();
    } catch (const std::exception& e) {
      log::error("an event handler failed; serving goes on", {{"error", e.what()}});
    }
  }
}

}  // namespace inflight
