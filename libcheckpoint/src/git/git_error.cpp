#include "git/git_error.hpp"

#include <git2.h>

#include <cerrno>
#include <cstring>

namespace inflight::checkpoint {

namespace {

bool is_transport_class(int error_class) {
  switch (error_class) {
    case GIT_ERROR_NET:
    case GIT_ERROR_SSL:
    case GIT_ERROR_SSH:
    case GIT_ERROR_OS:
    case GIT_ERROR_HTTP:
      return true;
    default:
      return false;
  }
}

}  // namespace

Failure classify_git_error(int code, int error_class, GitCallScope scope) {
  if (code == GIT_EAUTH) return Failure::auth;
  if (code == GIT_ENONFASTFORWARD) return Failure::rejected;
  if (code == GIT_ENOTFOUND) return Failure::not_found;
  // Writing objects or refs into the cache: a full disk, a lock left by a
  // killed agent.
  if (scope == GitCallScope::local && (error_class == GIT_ERROR_OS || code == GIT_ELOCKED))
    return Failure::cache;
  if (scope == GitCallScope::network &&
      (code == GIT_ECERTIFICATE || is_transport_class(error_class))) {
    return Failure::unreachable;
  }
  return Failure::other;
}

bool disk_full_or_read_only(int error) {
  return error == ENOSPC || error == EDQUOT || error == EROFS;
}

// A disk that is full or read-only cannot hold a checkpoint (Failure::cache): the caller's disk
// health hears of it.
void throw_errno(const std::string& what, const std::string& path) {
  const int error = errno;
  throw GitError(disk_full_or_read_only(error) ? Failure::cache : Failure::other,
                 what + " " + printable(path) + ": " + std::strerror(error));
}

void throw_git_error(int code, const std::string& context, GitCallScope scope) {
  const git_error* last = git_error_last();
  const int error_class = last != nullptr ? last->klass : GIT_ERROR_NONE;
  std::string message = context;
  if (last != nullptr && last->message != nullptr) message += ": " + std::string(last->message);
  git_error_clear();
  throw GitError(classify_git_error(code, error_class, scope), message);
}

}  // namespace inflight::checkpoint
