// Where serve's own cgroup v2 directory is, and whether serve may make child
// cgroups under it: one per run attempt, so that `cgroup.kill` ends every
// process of the run however it left its group (docs/security.md "Process containment").
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace inflight {

struct Cgroup2Mount {
  std::string root;         // the part of the hierarchy the mount shows
  std::string mount_point;  // where it is mounted
};

// The cgroup2 mount in the text of /proc/self/mountinfo; hosts may mount it
// beside v1 hierarchies (/sys/fs/cgroup/unified) or alone (/sys/fs/cgroup).
std::optional<Cgroup2Mount> parse_cgroup2_mount(std::string_view mountinfo);

// The v2 path ("0::PATH") in the text of /proc/self/cgroup.
std::optional<std::string> parse_v2_cgroup_path(std::string_view proc_self_cgroup);

// The directory of `path` (as /proc/self/cgroup shows it) under `mount`;
// nullopt when the mount does not show it.
std::optional<std::filesystem::path> cgroup_dir(const Cgroup2Mount& mount, std::string_view path);

// Serve's own cgroup directory, or why it cannot have run cgroups under it.
struct CgroupProbe {
  std::optional<std::filesystem::path> dir;
  std::string why_not;
};

// Finds this process's cgroup and tries a child cgroup under it once (made,
// checked for cgroup.kill, removed).
CgroupProbe probe_own_cgroup();

}  // namespace inflight
