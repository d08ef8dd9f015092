// JSON from outside (HTTP bodies, run-params.json from a branch or a disk,
// config files, the agent's messages) is parsed only within limits. The
// depth is checked on the raw text before nlohmann's recursive parser runs,
// so a deeply nested document costs a scan, never the stack. Strings written
// into JSON text by hand (journal and log lines) are escaped here too.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "inflight/core/failure.hpp"

namespace inflight {

struct JsonLimits {
  std::size_t max_bytes = 1 << 20;
  int max_depth = 64;
};

// The parsed document, or an Error (Failure::other) whose message names what
// is wrong: too large, nested too deep, not JSON, not UTF-8.
Result<nlohmann::ordered_json> parse_bounded_json(std::string_view text, const JsonLimits& limits);
// The same into an nlohmann::json, whose objects keep their keys sorted (a
// std::map): a canonical form without a copy of the ordered document.
Result<nlohmann::json> parse_bounded_json_sorted(std::string_view text, const JsonLimits& limits);
// The text that parse_bounded_json_sorted's document dumps (keys sorted bytewise, a key given
// twice keeping its last value, no whitespace), written without building the document: a model
// call's identity is this text, and building the document took a score of allocations a call.
// The same Error when that refuses `text`.
Result<std::string> canonical_json(std::string_view text, const JsonLimits& limits);

// Whether `text` is well-formed UTF-8 (no overlong forms, no surrogates).
bool is_valid_utf8(std::string_view text);
// `text` with each byte that is not part of valid UTF-8 shown as `\xNN`, for
// messages about names that came from outside.
std::string printable(std::string_view text);

// Appends `text` as a JSON string in the form nlohmann's dump(-1, ' ', false,
// error_handler_t::replace) gives it: quotes, backslashes and control
// characters escaped, every other byte as it is, and text that is not valid
// UTF-8 with U+FFFD where nlohmann puts it (one for each bad sequence). Journal headers and log
// lines are written field by field with it: building a json value first copied each field.
void append_json_string(std::string& out, std::string_view text);
// append_json_string() of text known to be valid UTF-8 (a parsed document's strings, which
// canonical_json writes): not checked a second time.
void append_utf8_json_string(std::string& out, std::string_view valid_utf8);

}  // namespace inflight
