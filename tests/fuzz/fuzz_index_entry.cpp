// An index entry of inflight-index, and a line of layout 2's index
// (index_entry.hpp), on any bytes: branches anyone can write. Refused with a
// reason or read; what is read writes back to text that reads the same.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "inflight/checkpoint/index_entry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace ck = inflight::checkpoint;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (const auto entry = ck::parse_index_entry(text); !entry) {
    if (entry.error().message.empty()) std::abort();
  } else {
    const auto written = ck::write_index_entry(*entry);
    const auto again = ck::parse_index_entry(written);
    if (!again || ck::write_index_entry(*again) != written) std::abort();
  }
  const auto line = ck::parse_index_line(text, ck::Removals::allowed);
  if (!line) {
    if (line.error().message.empty()) std::abort();
    return 0;
  }
  const auto written =
      line->entry ? ck::write_index_line(*line->entry) : ck::write_removal_line(line->id);
  const auto again = ck::parse_index_line(written, ck::Removals::allowed);
  if (!again || again->id != line->id || again->entry.has_value() != line->entry.has_value() ||
      (again->entry && ck::write_index_line(*again->entry) != written))
    std::abort();
  if (!line->entry && ck::parse_index_line(text, ck::Removals::refused)) std::abort();
  return 0;
}
