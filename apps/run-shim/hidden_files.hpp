// The secret files serve was given (token files, config, SSH key) are files
// that a child of the same user could read: the run shim bind-mounts
// /dev/null over each in a mount namespace of the child's own, where the
// kernel allows one (docs/security.md "Process containment").
#pragma once

#include <string>
#include <vector>

namespace inflight {

// Prepared before the fork: the forked child then makes only system calls.
struct HiddenFiles {
  std::vector<std::string> paths;  // canonical, resolved before the fork
  std::string uid_map;             // "UID UID 1": the child's own uid, mapped to itself
  std::string gid_map;
};

// `paths` resolved (symlinks followed) and the maps for the calling
// process's uid and gid.
HiddenFiles prepare_hidden_files(const std::vector<const char*>& paths);

// In the forked child, before exec: hides every path, or writes one line to
// stderr saying why not. The child runs either way.
void hide_files(const HiddenFiles& files);

}  // namespace inflight
