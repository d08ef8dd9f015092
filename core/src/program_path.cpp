// PATH lookup without a process library: core stays free of Boost.Process.
#include "inflight/core/program_path.hpp"

#include <unistd.h>

#include <cstdlib>
#include <string_view>

namespace inflight {

namespace {

bool is_executable_file(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::optional<std::filesystem::path> find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "";
  while (!dirs.empty()) {
    const auto colon = dirs.find(':');
    const auto dir = dirs.substr(0, colon);
    // An empty entry, the current directory to a shell, is skipped: a
    // child's program never depends on where serve happened to start.
    if (!dir.empty()) {
      const auto candidate = std::filesystem::path(dir) / program;
      if (is_executable_file(candidate)) return candidate;
    }
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return std::nullopt;
}

std::optional<std::string> program_problem(const std::string& program,
                                           const std::filesystem::path& cwd) {
  std::filesystem::path path;
  if (program.find('/') == std::string::npos) {
    const auto found = find_on_path(program);
    if (!found) return "cannot start " + program + ": not found on PATH";
    path = *found;
  } else {
    path = cwd / program;  // exec runs in the child's cwd
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return "cannot start " + program + ": " + path.string() + " is not a file";
  if (::access(path.c_str(), X_OK) != 0)
    return "cannot start " + program + ": " + path.string() + " is not executable";
  return std::nullopt;
}

}  // namespace inflight
