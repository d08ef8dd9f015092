// Finds and probes serve's cgroup v2 directory (see cgroup.hpp).
#include "inflight/supervisor/process/cgroup.hpp"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

namespace inflight {

namespace fs = std::filesystem;

namespace {

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const auto end = text.find(separator, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

// mountinfo writes a space, tab, newline or backslash in a path as \ooo.
std::string unescape_octal(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const bool escape = text[i] == '\\' && i + 3 < text.size() &&
                        text.substr(i + 1, 3).find_first_not_of("01234567") == std::string::npos;
    if (!escape) {
      out += text[i];
      continue;
    }
    out += static_cast<char>(std::stoi(std::string(text.substr(i + 1, 3)), nullptr, 8));
    i += 3;
  }
  return out;
}

std::string read_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

// A line: ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE ...
std::optional<Cgroup2Mount> parse_cgroup2_mount(std::string_view mountinfo) {
  for (const auto line : split(mountinfo, '\n')) {
    const auto fields = split(line, ' ');
    std::size_t dash = 0;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (dash < 5 || dash + 1 >= fields.size() || fields[dash + 1] != "cgroup2") continue;
    return Cgroup2Mount{unescape_octal(fields[3]), unescape_octal(fields[4])};
  }
  return std::nullopt;
}

std::optional<std::string> parse_v2_cgroup_path(std::string_view proc_self_cgroup) {
  for (const auto line : split(proc_self_cgroup, '\n'))
    if (line.starts_with("0::/")) return std::string(line.substr(3));
  return std::nullopt;
}

std::optional<fs::path> cgroup_dir(const Cgroup2Mount& mount, std::string_view path) {
  const fs::path root = mount.root;
  const auto relative = fs::path(path).lexically_relative(root);
  if (relative.empty() || *relative.begin() == "..") return std::nullopt;
  if (relative == ".") return fs::path(mount.mount_point);
  return (fs::path(mount.mount_point) / relative).lexically_normal();
}

CgroupProbe probe_own_cgroup() {
  const auto mount = parse_cgroup2_mount(read_text("/proc/self/mountinfo"));
  if (!mount) return {std::nullopt, "no cgroup2 file system is mounted"};
  const auto path = parse_v2_cgroup_path(read_text("/proc/self/cgroup"));
  if (!path) return {std::nullopt, "/proc/self/cgroup shows no cgroup v2 path"};
  const auto dir = cgroup_dir(*mount, *path);
  if (!dir)
    return {std::nullopt, "this process's cgroup " + *path + " is outside the cgroup2 mount at " +
                              mount->mount_point};
  const auto probe = *dir / ("inflight-probe-" + std::to_string(::getpid()));
  std::error_code ec;
  if (!fs::create_directory(probe, ec) && ec)
    return {std::nullopt, "cannot create a cgroup under " + dir->string() + ": " + ec.message()};
  const bool killable = fs::exists(probe / "cgroup.kill", ec);
  const bool movable = ::access((*dir / "cgroup.procs").c_str(), W_OK) == 0 &&
                       ::access((probe / "cgroup.procs").c_str(), W_OK) == 0;
  fs::remove(probe, ec);
  if (!killable)
    return {std::nullopt, "the kernel has no cgroup.kill (Linux 5.14 or later needed)"};
  if (!movable)
    return {std::nullopt, "cannot move processes under " + dir->string() + ": not writable"};
  return {*dir, ""};
}

}  // namespace inflight
