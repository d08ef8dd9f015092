#include "remote/remote_callbacks.hpp"

#include "git/git_error.hpp"

namespace inflight::checkpoint {

git_remote_callbacks RemoteCallbacks::callbacks() {
  git_remote_callbacks callbacks = GIT_REMOTE_CALLBACKS_INIT;
  callbacks.credentials = &RemoteCallbacks::credentials;
  callbacks.certificate_check = &RemoteCallbacks::certificate_check;
  callbacks.push_update_reference = &RemoteCallbacks::push_update_reference;
  if (download_limit_) callbacks.transfer_progress = &RemoteCallbacks::transfer_progress;
  callbacks.payload = this;
  return callbacks;
}

int RemoteCallbacks::refuse(Failure kind, const std::string& message, int code) {
  failure_.emplace(kind, location_.scrub(message, config_.token));
  // libgit2 reports the message set here if it reports any.
  git_error_set_str(GIT_ERROR_CALLBACK, failure_->what());
  return code;
}

int RemoteCallbacks::transfer_progress(const git_indexer_progress* progress, void* payload) {
  auto& self = *static_cast<RemoteCallbacks*>(payload);
  self.received_ = self.received_ || progress->received_bytes > 0;
  if (progress->received_bytes <= *self.download_limit_) return 0;
  return self.refuse(Failure::other,
                     "the answer passed " + std::to_string(*self.download_limit_) + " bytes", -1);
}

int RemoteCallbacks::push_update_reference(const char* refname, const char* status, void* payload) {
  if (status != nullptr) {
    static_cast<RemoteCallbacks*>(payload)->refused_refs_.emplace_back(refname, status);
  }
  return 0;
}

void RemoteCallbacks::throw_failure(int code, const std::string& doing) {
  if (failure_) throw *failure_;
  try {
    throw_git_error(code, doing + " " + location_.display, GitCallScope::network);
  } catch (const GitError& error) {
    std::string message = error.what();
    if (error.kind() == Failure::auth) message = auth_failure_message() + ": " + message;
    throw GitError(error.kind(), location_.scrub(message, config_.token));
  }
}

void RemoteCallbacks::check_push_accepted(const std::string& doing) const {
  if (refused_refs_.empty()) return;
  auto kind = Failure::other;
  std::string refs;
  for (const auto& [ref, status] : refused_refs_) {
    const auto failure = *failure_of(ref);
    if (kind != Failure::rejected) kind = checkpoint::failure_of(failure.outcome);
    refs += (refs.empty() ? "" : "; ") + ref + ": " + failure.detail;
  }
  throw GitError(kind,
                 location_.scrub(doing + " " + location_.display + ": " + refs, config_.token));
}

namespace {

// What git's receive-pack (and servers that speak like it) answers for an
// update it could not write: the ref moved after it was advertised, or
// another push held a lock (its own, or packed-refs while a deletion rewrote
// them). The words cannot tell another owner from a busy lock, so the tips
// listed again decide (RemoteStore::update). Anything else is the server's
// own rule.
bool could_not_write(std::string_view status) {
  for (const std::string_view race :
       {"non-fast-forward", "fetch first", "stale info", "failed to lock", "cannot lock ref",
        "failed to update ref", "already exists"})
    if (status.find(race) != std::string_view::npos) return true;
  return false;
}

}  // namespace

std::optional<RefResult> RemoteCallbacks::failure_of(const std::string& ref) const {
  for (const auto& [refused, status] : refused_refs_) {
    if (refused != ref) continue;
    if (location_.local_path || could_not_write(status))
      return RefResult{.outcome = RefOutcome::unwritten, .detail = "could not write it: " + status};
    return RefResult{.outcome = RefOutcome::refused, .detail = "the server refused it: " + status};
  }
  return std::nullopt;
}

}  // namespace inflight::checkpoint
