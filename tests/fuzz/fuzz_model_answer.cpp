// The reader of a provider's answer (model_answer.hpp): SSE events, terminal
// and error events, usage in the three APIs' places. A provider's bytes are
// untrusted and arrive in any pieces: read whole or cut at any byte, an
// answer must end the same way with the same usage.
// Input: a flags byte (bit 0: an event stream), a cut byte, then the body.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "inflight/supervisor/models/model_answer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using inflight::models::AnswerWatcher;
  if (size < 2) return 0;
  const bool event_stream = (data[0] & 1) != 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 2, size - 2);
  const std::size_t cut = body.empty() ? 0 : data[1] % (body.size() + 1);
  AnswerWatcher whole(event_stream);
  whole.feed(body);
  AnswerWatcher pieces(event_stream);
  pieces.feed(body.substr(0, cut));
  pieces.feed(body.substr(cut));
  if (whole.finish() != pieces.finish()) std::abort();
  if (whole.usage().input != pieces.usage().input || whole.usage().output != pieces.usage().output)
    std::abort();
  if (whole.finish() != pieces.finish()) std::abort();  // a second call answers the same
  return 0;
}
