#include "inflight/checkpoint/ssh_trust.hpp"
#include "remote/remote_callbacks.hpp"

namespace inflight::checkpoint {

namespace {

// libgit2 asks again after every refused credential; a few tries cover a
// username query plus a retry, and stopping ends an auth failure in seconds.
constexpr int kMaxCredentialCalls = 3;

std::string first_non_empty(std::initializer_list<std::string> candidates) {
  for (const auto& candidate : candidates) {
    if (!candidate.empty()) return candidate;
  }
  return {};
}

}  // namespace

int RemoteCallbacks::credentials(git_credential** out, const char* /*url*/,
                                 const char* username_from_url, unsigned int allowed_types,
                                 void* payload) {
  return static_cast<RemoteCallbacks*>(payload)->provide_credential(out, username_from_url,
                                                                    allowed_types);
}

std::string RemoteCallbacks::auth_failure_message() const {
  std::string message = "authentication to " + location_.display + " failed";
  if (!config_.ssh_key.empty()) {
    if (const auto limitation = rsa_key_limitation(config_.ssh_key)) message += ": " + *limitation;
  }
  return message;
}

int RemoteCallbacks::provide_credential(git_credential** out, const char* username_from_url,
                                        unsigned int allowed_types) {
  if (++credential_calls_ > kMaxCredentialCalls) {
    return refuse(Failure::auth, auth_failure_message(), GIT_EAUTH);
  }
  const std::string from_url = username_from_url != nullptr ? username_from_url : "";
  if ((allowed_types & GIT_CREDENTIAL_SSH_KEY) != 0 && !config_.ssh_key.empty()) {
    const std::string user = first_non_empty({from_url, config_.username, "git"});
    const auto public_key = config_.ssh_key.string() + ".pub";
    const bool has_public = std::filesystem::exists(public_key);
    return git_credential_ssh_key_new(out, user.c_str(), has_public ? public_key.c_str() : nullptr,
                                      config_.ssh_key.c_str(), nullptr);
  }
  if ((allowed_types & GIT_CREDENTIAL_USERNAME) != 0) {
    const std::string user = first_non_empty({from_url, config_.username, "git"});
    return git_credential_username_new(out, user.c_str());
  }
  if ((allowed_types & GIT_CREDENTIAL_USERPASS_PLAINTEXT) != 0 && !config_.token.empty()) {
    const std::string user = first_non_empty({config_.username, from_url, "inflight"});
    return git_credential_userpass_plaintext_new(out, user.c_str(), config_.token.c_str());
  }
  return refuse(Failure::auth,
                location_.display +
                    " asks for credentials but none of the kind it accepts are "
                    "configured (--git-token for HTTPS, --git-ssh-key for SSH)",
                GIT_EAUTH);
}

}  // namespace inflight::checkpoint
