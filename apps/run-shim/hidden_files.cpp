// Hiding serve's secret files from a run's child: see hidden_files.hpp.
#include "hidden_files.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace inflight {

HiddenFiles prepare_hidden_files(const std::vector<const char*>& paths) {
  const auto uid = std::to_string(::getuid());
  const auto gid = std::to_string(::getgid());
  HiddenFiles files{{}, uid + " " + uid + " 1", gid + " " + gid + " 1"};
  // Resolved at each attempt: a Kubernetes Secret's file is a symlink into a
  // folder that the kubelet replaces when the Secret changes.
  // One that cannot be resolved is kept as given: its mount fails, and says so.
  for (const char* path : paths) {
    char* resolved = ::realpath(path, nullptr);
    files.paths.emplace_back(resolved != nullptr ? resolved : path);
    std::free(resolved);
  }
  return files;
}

namespace {

// Writes `text` to a /proc/self file; false with errno set when it fails.
bool write_file(const char* path, std::string_view text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int error = errno;
  ::close(fd);
  errno = error;
  return written;
}

// A user namespace, and a mount namespace it owns, where the child's uid and
// gid are mapped to themselves (setgroups denied first, as the kernel
// requires of an unprivileged gid map). The step that failed, errno set.
const char* enter_user_namespace(const HiddenFiles& files) {
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return "unshare";
  if (!write_file("/proc/self/setgroups", "deny")) return "setgroups";
  if (!write_file("/proc/self/uid_map", files.uid_map)) return "uid_map";
  if (!write_file("/proc/self/gid_map", files.gid_map)) return "gid_map";
  return nullptr;
}

// A mount namespace of the child's own: at once with CAP_SYS_ADMIN, else in
// a user namespace. Private first, so that no mount reaches serve's
// namespace; then /dev/null over each file: reads of it find nothing. In a
// user namespace the child (uid 0 there when serve is root) could unmount
// those: one more user namespace locks them. The step that failed, errno set.
const char* bind_over(const HiddenFiles& files) {
  const bool privileged = ::unshare(CLONE_NEWNS) == 0;
  if (!privileged)
    if (const char* failed = enter_user_namespace(files)) return failed;
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return "mount --make-rprivate /";
  // Every file is tried, and what was mounted is locked, even when one fails.
  const char* failed = nullptr;
  int error = 0;
  for (const auto& path : files.paths)
    if (::mount("/dev/null", path.c_str(), nullptr, MS_BIND, nullptr) != 0 && failed == nullptr) {
      failed = path.c_str();
      error = errno;
    }
  if (!privileged)
    if (const char* lock_failed = enter_user_namespace(files)) return lock_failed;
  errno = error;
  return failed;
}

// One line to the child's stderr (console.log), in one write.
void report(const char* step, int error) {
  const char* description = ::strerrordesc_np(error);
  char line[512] = "inflight-run-shim: secret files not hidden from the child: ";
  for (const char* part : {step, ": ", description != nullptr ? description : "unknown error"})
    std::strncat(line, part, sizeof line - std::strlen(line) - 2);  // room for the newline
  std::strcat(line, "\n");
  (void)::write(2, line, std::strlen(line));
}

}  // namespace

void hide_files(const HiddenFiles& files) {
  if (files.paths.empty()) return;
  if (const char* failed = bind_over(files)) report(failed, errno);
}

}  // namespace inflight
