// The canonical form of a child's request body (model_request.hpp), which
// names the recorded answer a replay gives: any bytes a child sends. JSON is
// sorted and stripped of the ignored fields, anything else kept as it is;
// either way the form of a canonical body is itself.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "inflight/supervisor/models/model_request.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using inflight::models::canonical_body;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> ignore = {"/metadata/user_id", "/user", "/a~1b/0",
                                           "not/a/pointer"};
  const auto once = canonical_body(body, ignore);
  if (canonical_body(once, ignore) != once) std::abort();
  return 0;
}
