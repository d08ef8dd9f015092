#include "inflight/supervisor/event_loop.hpp"

#include <exception>

#include "inflight/supervisor/log.hpp"

namespace inflight {

void run_event_loop(boost::asio::io_context& io) {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      log::error("an event handler failed; serving goes on", {{"error", e.what()}});
    }
  }
}

}  // namespace inflight
