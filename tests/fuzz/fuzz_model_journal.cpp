// One line of the model-call journal (model_journal.hpp) on any bytes: a child
// or a branch may have written the file. A line is refused with a reason or
// read; what is read writes back to a line that reads the same record.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "inflight/supervisor/models/model_journal.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  const auto record = inflight::models::parse_journal_line(line);
  if (!record) {
    if (record.error().message.empty()) std::abort();
    return 0;
  }
  const auto again = inflight::models::parse_journal_line(write_journal_line(*record));
  if (!again || !(*again == *record)) std::abort();
  return 0;
}
