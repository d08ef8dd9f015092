// Looks up inflight's helper binaries (see sibling_binaries.hpp).
#include "inflight/supervisor/process/sibling_binaries.hpp"

#include <unistd.h>

#include <string>

#include "inflight/supervisor/config/settings.hpp"

namespace inflight {

namespace fs = std::filesystem;

fs::path running_binary() {
  return fs::read_symlink("/proc/self/exe");
}

std::vector<fs::path> sibling_binary_places(std::string_view name, const fs::path& self) {
  const auto dir = self.parent_path();
  return {dir / name, (dir / ".." / "libexec" / "inflight" / name).lexically_normal()};
}

std::optional<fs::path> find_sibling_binary(std::string_view name, const fs::path& self) {
  for (const auto& place : sibling_binary_places(name, self)) {
    std::error_code ec;
    if (fs::is_regular_file(place, ec) && ::access(place.c_str(), X_OK) == 0) return place;
  }
  return std::nullopt;
}

fs::path checkpoint_agent_binary(const fs::path& self) {
  if (auto found = find_sibling_binary(kCheckpointAgentName, self)) return *found;
  const auto places = sibling_binary_places(kCheckpointAgentName, self);
  throw UsageError(std::string(kCheckpointAgentName) + " not found: looked for " +
                   places[0].string() + " and " + places[1].string() +
                   "\nit runs every git step: build it with `cmake --build build` (all targets), "
                   "or install inflight with `cmake --install build`");
}

}  // namespace inflight
