// Base64 for SSH key material (known_hosts entries, public keys): the one
// decoder, strict, since the text comes from files an operator supplies.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace inflight::checkpoint {

// Standard base64 with optional '=' padding; nullopt on any other character.
std::optional<std::string> decode_base64(std::string_view text);

}  // namespace inflight::checkpoint
