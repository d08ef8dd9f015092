#pragma once

#include "inflight/supervisor/config/settings.hpp"

namespace inflight {

// Runs `inflight serve` until shutdown; returns the process exit code.
int serve(const ServeSettings& settings);

}  // namespace inflight
