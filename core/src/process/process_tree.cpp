// Reads process parent links from /proc (see process_tree.hpp).
#include "inflight/core/process_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdlib>
#include <set>
#include <string>

#include "inflight/core/fd.hpp"

namespace inflight {

std::optional<pid_t> ppid_from_stat(std::string_view stat) {
  const auto close = stat.rfind(')');
  // After the name: " S PPID ...", the state a single character.
  if (close == std::string_view::npos || stat.size() < close + 4) return std::nullopt;
  const auto rest = stat.substr(close + 4);
  pid_t ppid = 0;
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), ppid);
  if (error != std::errc() || end == rest.data()) return std::nullopt;
  return ppid;
}

std::vector<pid_t> descendants_of(pid_t root, std::span<const ProcessLink> links) {
  std::vector<pid_t> found{root};
  // Breadth first: each pass adds the children of the processes found so far.
  // A pid reused while /proc was read may make a cycle: nothing is added twice.
  for (std::size_t next = 0; next < found.size(); ++next)
    for (const auto& link : links)
      if (link.ppid == found[next] &&
          std::find(found.begin(), found.end(), link.pid) == found.end())
        found.push_back(link.pid);
  found.erase(found.begin());
  return found;
}

std::optional<pid_t> read_ppid(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  char buffer[1024];
  const auto got = ::read(fd.get(), buffer, sizeof buffer);
  if (got <= 0) return std::nullopt;
  return ppid_from_stat({buffer, static_cast<std::size_t>(got)});
}

std::vector<ProcessLink> read_process_links() {
  std::vector<ProcessLink> links;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return links;
  while (const dirent* entry = ::readdir(proc)) {
    const std::string_view name = entry->d_name;
    pid_t pid = 0;
    const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (error != std::errc() || end != name.data() + name.size()) continue;
    if (const auto ppid = read_ppid(pid)) links.push_back({pid, *ppid});
  }
  ::closedir(proc);
  return links;
}

namespace {

enum class KillResult { signalled, gone, parent_changed };

KillResult kill_if_parent_is(const ProcessLink& link, std::vector<Fd>* exits) {
  Fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, link.pid, 0)));
  if (!pidfd) return KillResult::gone;
  if (read_ppid(link.pid) != link.ppid) return KillResult::parent_changed;
  if (::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0) != 0)
    return KillResult::gone;
  if (exits) exits->push_back(std::move(pidfd));
  return KillResult::signalled;
}

// One read of /proc: signals the doomed not signalled yet. True when another
// read is needed: some were signalled, or some changed parent meanwhile.
bool kill_pass(pid_t root, std::span<const pid_t> spared, std::span<const ProcessLink> links,
               std::set<pid_t>& signalled, std::vector<Fd>* exits) {
  auto doomed = descendants_of(root, links);
  for (const pid_t keep : spared) {
    std::erase(doomed, keep);
    for (const pid_t below : descendants_of(keep, links)) std::erase(doomed, below);
  }
  bool again = false;
  for (const auto& link : links) {
    if (signalled.contains(link.pid) ||
        std::find(doomed.begin(), doomed.end(), link.pid) == doomed.end())
      continue;
    const auto result = kill_if_parent_is(link, exits);
    if (result == KillResult::signalled) signalled.insert(link.pid);
    again = again || result != KillResult::gone;
  }
  return again;
}

}  // namespace

std::size_t kill_descendants(pid_t root, std::span<const pid_t> spared,
                             const std::function<std::vector<ProcessLink>()>& read_links,
                             std::vector<Fd>* exits) {
  // Bounded: a tree that forks faster than it is read is the caller's to
  // call again (the shim does until nothing is left).
  constexpr int kMaxReads = 64;
  std::set<pid_t> signalled;
  bool again = true;
  for (int read = 0; again && read < kMaxReads; ++read)
    again = kill_pass(root, spared, read_links(), signalled, exits);
  return signalled.size();
}

bool wait_ended(const std::vector<Fd>& exits, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<pollfd> waiting;
  for (const auto& pidfd : exits) waiting.push_back({pidfd.get(), POLLIN, 0});
  while (!waiting.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    const int ready = ::poll(waiting.data(), waiting.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) return false;
    std::erase_if(waiting, [](const pollfd& p) { return p.revents != 0; });
  }
  return true;
}

}  // namespace inflight
