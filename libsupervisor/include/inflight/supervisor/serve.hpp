#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>

#include "inflight/supervisor/checkpoint_port.hpp"
#include "inflight/supervisor/settings.hpp"

namespace inflight {

using CheckpointPortFactory =
    std::function<std::unique_ptr<CheckpointPort>(boost::asio::io_context&)>;

// Runs `inflight serve` until shutdown; returns the process exit code.
int serve(const ServeSettings& settings, const CheckpointPortFactory& make_checkpoints);

}  // namespace inflight
