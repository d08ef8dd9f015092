// `inflight serve`: the long-running instance that the HTTP API, the
// restore and the shutdown plan belong to.
#pragma once

#include "inflight/supervisor/config/settings.hpp"

namespace inflight {

// Runs `inflight serve` until shutdown; returns the process exit code.
int serve(const ServeSettings& settings);

}  // namespace inflight
