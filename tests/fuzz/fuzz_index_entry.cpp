// An index entry of inflight-index (index_entry.hpp) on any bytes: a branch
// anyone can write. Refused with a reason or read; what is read writes back
// to text that reads the same entry.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "inflight/checkpoint/index_entry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto entry = inflight::checkpoint::parse_index_entry(text);
  if (!entry) {
    if (entry.error().message.empty()) std::abort();
    return 0;
  }
  const auto written = inflight::checkpoint::write_index_entry(*entry);
  const auto again = inflight::checkpoint::parse_index_entry(written);
  if (!again || inflight::checkpoint::write_index_entry(*again) != written) std::abort();
  return 0;
}
