// The file `inflight runs list` keeps its last output in (runs_list_cache.hpp), on any bytes: it
// sits in a directory the eval children can write. Read or refused, never a crash; what is read
// writes back to a file that reads the same.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "runs_list_cache.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace app = inflight::app;
  constexpr std::string_view kArgs = "fuzz json - git://127.0.0.1/results.git";
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto listing = app::parse_cached_listing(text, kArgs);
  if (!listing) return 0;
  const auto again = app::parse_cached_listing(app::write_cached_listing(kArgs, *listing), kArgs);
  if (!again || again->digest != listing->digest || again->problems != listing->problems ||
      again->output != listing->output)
    std::abort();
  return 0;
}
