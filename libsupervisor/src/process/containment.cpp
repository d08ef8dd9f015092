// Chooses how runs are contained, once at start (see containment.hpp).
#include "inflight/supervisor/process/containment.hpp"

#include "inflight/core/log.hpp"
#include "inflight/core/word_table.hpp"
#include "inflight/supervisor/config/settings.hpp"
#include "inflight/supervisor/process/cgroup.hpp"
#include "inflight/supervisor/process/sibling_binaries.hpp"

namespace inflight {

namespace {

constexpr WordTable<ContainmentMode, 3> kModes{{
    {ContainmentMode::automatic, "auto"},
    {ContainmentMode::cgroup, "cgroup"},
    {ContainmentMode::shim, "shim"},
}};

std::filesystem::path run_shim_binary() {
  if (auto found = find_sibling_binary(kRunShimName)) return *found;
  const auto places = sibling_binary_places(kRunShimName);
  throw UsageError(std::string(kRunShimName) + " not found: looked for " + places[0].string() +
                   " and " + places[1].string() +
                   "\nevery run's child starts under it: build it with `cmake --build build` (all "
                   "targets), or install inflight with `cmake --install build`");
}

}  // namespace

std::optional<ContainmentMode> containment_mode_named(std::string_view word) {
  return value_of(kModes, word);
}

Containment choose_containment(ContainmentMode mode) {
  Containment chosen{.shim = run_shim_binary(), .cgroup_parent = std::nullopt};
  if (mode == ContainmentMode::shim) {
    log::info("containment: run shim, without cgroups", {{"why", "--containment shim"}});
    return chosen;
  }
  const auto probe = probe_own_cgroup();
  if (probe.dir) {
    chosen.cgroup_parent = probe.dir;
    log::info("containment: a cgroup per attempt, under the run shim",
              {{"cgroup", probe.dir->string()},
               {"why", mode == ContainmentMode::cgroup ? "--containment cgroup"
                                                       : "serve's cgroup can be written"}});
    return chosen;
  }
  if (mode == ContainmentMode::cgroup)
    throw UsageError("--containment cgroup: " + probe.why_not +
                     "\nrun serve where its cgroup can be written (a systemd unit with "
                     "Delegate=yes, a container with its own cgroup namespace), or use "
                     "--containment auto");
  log::info("containment: run shim, without cgroups", {{"why", probe.why_not}});
  return chosen;
}

}  // namespace inflight
