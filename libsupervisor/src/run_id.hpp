#pragma once

#include <string>

namespace inflight {

// `[A-Za-z0-9][A-Za-z0-9._-]{0,63}` (SPEC §3)
bool is_valid_run_id(const std::string& id);

// `r-YYYYMMDDTHHMMSSZ-<6 hex>`
std::string generate_run_id();

}  // namespace inflight
