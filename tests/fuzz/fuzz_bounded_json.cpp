// Bounded JSON (core/bounded_json.hpp) on any bytes: the reader of every JSON
// document that comes from outside (request bodies, run-params.json, index
// entries, journal lines). It must refuse, never crash; what it takes, it
// takes in both key orders alike, and its canonical text is the sorted document's dump; UTF-8
// checks agree with printable().
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "inflight/core/bounded_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const inflight::JsonLimits limits{.max_bytes = 64 * 1024, .max_depth = 16};
  const auto ordered = inflight::parse_bounded_json(text, limits);
  const auto sorted = inflight::parse_bounded_json_sorted(text, limits);
  if (ordered.has_value() != sorted.has_value()) std::abort();
  if (ordered && nlohmann::json(*ordered) != *sorted) std::abort();
  const auto canonical = inflight::canonical_json(text, limits);
  if (canonical.has_value() != sorted.has_value()) std::abort();
  if (canonical && *canonical != sorted->dump()) std::abort();
  const bool utf8 = inflight::is_valid_utf8(text);
  if (utf8 && inflight::printable(text) != text) std::abort();
  return 0;
}
