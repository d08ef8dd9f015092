// serve and resume are one Asio event loop each. Handlers catch the failures
// they expect (a request, a write, a peer) and turn them into an answer or a
// marked run; whatever still escapes one handler is logged here and the loop
// goes on, so that no handler can take the supervisor down before it has
// checkpointed every run.
#pragma once

#include <boost/asio/io_context.hpp>

namespace inflight {

// Runs `io` until it is stopped or out of work. SIGTERM and SIGINT are
// blocked once it returns: the loop's signal_set is about to go, and a late
// second signal must not kill the process between the loop's end and its exit
// (it would turn a decided exit code into "killed by SIGTERM"). While it
// runs, the log's lines are written once per turn of the loop (log::Batch).
void run_event_loop(boost::asio::io_context& io);

}  // namespace inflight
