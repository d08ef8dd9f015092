// One record of the model-call journal (model_journal.hpp) on any bytes: a
// child or a branch may have written the file. A record, of either version, is
// refused with a reason or read; what is read writes back to a record that
// reads the same.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "inflight/supervisor/models/model_journal.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto record = inflight::models::parse_journal_record(bytes);
  if (!record) {
    if (record.error().message.empty()) std::abort();
    return 0;
  }
  const auto again = inflight::models::parse_journal_record(write_journal_record(*record));
  if (!again || !(*again == *record)) std::abort();
  return 0;
}
