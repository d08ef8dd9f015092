// Tests of the event loop's logic wait for an effect, never for a fixed time:
// the loop runs until the effect shows or a deadline passes.
#pragma once

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>

namespace inflight {

// Runs `io` until `effect` holds, for at most `limit`; returns whether it
// held. The effect is looked at after every handler and every few
// milliseconds besides, for effects outside the loop (a child's file). A loop
// out of work can change nothing more.
inline bool run_until(boost::asio::io_context& io, const std::function<bool()>& effect,
                      std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  constexpr std::chrono::milliseconds kLookAgain{5};
  const auto end = std::chrono::steady_clock::now() + limit;
  if (io.stopped()) io.restart();
  while (!effect()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= end) return false;
    io.run_one_until(std::min(end, now + kLookAgain));
    if (io.stopped()) return effect();
  }
  return true;
}

}  // namespace inflight
