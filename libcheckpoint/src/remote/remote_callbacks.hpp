// libgit2 callbacks for one remote operation, and what they saw: the
// failure they caused (auth given up, host key refused) and the refs the
// server refused.
#pragma once

#include <git2.h>

#include <optional>
#include <string>
#include <vector>

#include "inflight/checkpoint/git_store.hpp"
#include "inflight/checkpoint/remote_url.hpp"

namespace inflight::checkpoint {

class RemoteCallbacks {
 public:
  RemoteCallbacks(const RemoteConfig& config, const RemoteLocation& location)
      : config_(config), location_(location) {}
  RemoteCallbacks(const RemoteCallbacks&) = delete;
  RemoteCallbacks& operator=(const RemoteCallbacks&) = delete;

  // Callbacks whose payload is this object; it must outlive the operation.
  git_remote_callbacks callbacks();

  // After a failed libgit2 network call: the failure a callback recorded,
  // else libgit2's error, classified, naming the remote and no secret.
  [[noreturn]] void throw_failure(int code, const std::string& doing);

  // Throws when a pushed ref was not written (failure_of): GitError(rejected)
  // when it lost a race, GitError(refused) when a server's rule refused it,
  // GitError(other) when it is unwritten.
  void check_push_accepted(const std::string& doing) const;
  // Why `ref` was not written, if it was not: taken when it lost a race,
  // refused when a server's rule refused it, unwritten when a local results
  // repo (libgit2 writes its refs itself, nobody judges them) could not write it.
  std::optional<RefResult> failure_of(const std::string& ref) const;
  // Before a push sent again: what the last one was refused is forgotten.
  void forget_refusals() { refused_refs_.clear(); }
  // A download that passes `bytes` is given up, as a failure naming the limit.
  void limit_download(std::size_t bytes) { download_limit_ = bytes; }
  // Whether a callback failed the operation (throw_failure throws what it recorded).
  bool failed() const { return failure_.has_value(); }
  // Whether a download under limit_download received any byte of a pack.
  bool received() const { return received_; }

 private:
  static int credentials(git_credential** out, const char* url, const char* username_from_url,
                         unsigned int allowed_types, void* payload);
  static int certificate_check(git_cert* cert, int valid, const char* host, void* payload);
  static int push_update_reference(const char* refname, const char* status, void* payload);
  static int transfer_progress(const git_indexer_progress* progress, void* payload);

  int provide_credential(git_credential** out, const char* username_from_url,
                         unsigned int allowed_types);
  int check_host_key(const git_cert_hostkey& key, const std::string& host);
  int refuse(Failure kind, const std::string& message, int code);
  std::string auth_failure_message() const;

  const RemoteConfig& config_;
  const RemoteLocation& location_;
  int credential_calls_ = 0;
  std::optional<GitError> failure_;
  std::vector<std::pair<std::string, std::string>> refused_refs_;  // ref, status
  std::optional<std::size_t> download_limit_;
  bool received_ = false;
};

}  // namespace inflight::checkpoint
