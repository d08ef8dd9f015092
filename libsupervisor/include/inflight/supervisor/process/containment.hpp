// How every process of a run ends with it (docs/security.md "Process containment"):
// always through the run shim, and through a cgroup per attempt where serve's
// own cgroup can be written. Chosen once at start by --containment.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

namespace inflight {

enum class ContainmentMode { automatic, cgroup, shim };

std::optional<ContainmentMode> containment_mode_named(std::string_view word);

struct Containment {
  std::filesystem::path shim;  // inflight-run-shim
  // Serve's own cgroup: each attempt gets a child cgroup under it. Unset: the
  // shim alone ends what the child started, found through /proc.
  std::optional<std::filesystem::path> cgroup_parent;
};

// Finds the shim and, unless `mode` is shim, probes serve's cgroup; logs what
// is used and why. Throws UsageError when the shim is missing, or when `mode`
// is cgroup and serve's cgroup cannot be written.
Containment choose_containment(ContainmentMode mode);

}  // namespace inflight
