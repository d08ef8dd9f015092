// Where a child's program is found. One rule, used both when the config is
// checked at start and when a child is spawned, so that a program accepted at
// start is the one that runs.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace inflight {

// The first executable regular file named `program` in a directory of PATH
// (empty entries skipped); nullopt when there is none or PATH is unset.
// `program` holds no '/'.
std::optional<std::filesystem::path> find_on_path(const std::string& program);

// Why `program` cannot be started from `cwd` (not found on PATH, not a file,
// not executable), or nullopt when it can.
std::optional<std::string> program_problem(const std::string& program,
                                           const std::filesystem::path& cwd);

}  // namespace inflight
