// Turns libgit2's (code, thread-local last error) pair into a GitError.
// Must run on the thread that made the failing call, right after it.
#pragma once

#include <string>
#include <vector>

#include "inflight/checkpoint/git_store.hpp"
#include "inflight/core/bounded_json.hpp"

namespace inflight::checkpoint {

// Whether the failing call talked to a remote: only then do network, TLS,
// SSH and OS failures mean "unreachable" rather than a local problem.
enum class GitCallScope { local, network };

Failure classify_git_error(int code, int error_class, GitCallScope scope);

[[noreturn]] void throw_git_error(int code, const std::string& context,
                                  GitCallScope scope = GitCallScope::local);

// Throws the failure of a system call on `path` (shown with printable(): a
// run dir's names are a child's), errno read before anything can change it.
// Throws GitError for errno after `what` on `path`: Failure::cache when the disk is full or
// read-only (disk_full_or_read_only), else Failure::other.
[[noreturn]] void throw_errno(const std::string& what, const std::string& path);
bool disk_full_or_read_only(int error);

// Throws when code < 0; `context` says what was being done, e.g. "open cache repo /x".
inline void git_check(int code, const std::string& context,
                      GitCallScope scope = GitCallScope::local) {
  if (code < 0) throw_git_error(code, context, scope);
}

// Runs `step` for one ref, whose failure is its own: a line of `problems`
// naming the ref. A failure of the connection (unreachable, refused
// credentials) is every ref's, and is thrown on.
template <class Step>
void for_one_ref(const std::string& ref, std::vector<std::string>& problems, Step&& step) {
  try {
    step();
  } catch (const GitError& e) {
    if (e.network()) throw;
    problems.push_back(printable(ref) + ": " + e.what());
  } catch (const std::exception& e) {
    problems.push_back(printable(ref) + ": " + e.what());
  }
}

}  // namespace inflight::checkpoint
