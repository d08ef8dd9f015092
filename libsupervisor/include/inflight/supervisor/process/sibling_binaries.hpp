// `inflight` runs helper binaries of its own (the checkpoint agent, the demo
// child, the run shim). This is the one rule for where they live, so that a build tree and
// an installed tree both work: next to `inflight` in a build tree (build/bin),
// in <prefix>/libexec/inflight/ once installed (apps/CMakeLists.txt installs
// them there).
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

namespace inflight {

inline constexpr std::string_view kCheckpointAgentName = "inflight-checkpoint-agent";
inline constexpr std::string_view kDemoChildName = "inflight-demo-eval";
inline constexpr std::string_view kRunShimName = "inflight-run-shim";

// The running binary, resolved through /proc/self/exe (symlinks followed, so
// a link to an installed `inflight` still finds the installed helpers).
std::filesystem::path running_binary();

// Where `name` may be, in the order it is looked for, for the binary `self`.
std::vector<std::filesystem::path> sibling_binary_places(
    std::string_view name, const std::filesystem::path& self = running_binary());

// The first of sibling_binary_places() that is an executable file.
std::optional<std::filesystem::path> find_sibling_binary(
    std::string_view name, const std::filesystem::path& self = running_binary());

// The checkpoint agent, which every git network step needs. Throws UsageError
// naming the places it looked and how to build or install it, so that a
// missing agent stops a command at its start, not at its first network step.
std::filesystem::path checkpoint_agent_binary(const std::filesystem::path& self = running_binary());

}  // namespace inflight
