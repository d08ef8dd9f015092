// Server identity: SSH host keys against known_hosts, TLS certificates as
// libgit2 judged them against the CA bundle.
#include "inflight/checkpoint/ssh_trust.hpp"
#include "remote/remote_callbacks.hpp"

namespace inflight::checkpoint {

namespace {

std::string verdict_message(HostKeyVerdict verdict, const std::string& host,
                            const std::filesystem::path& known_hosts) {
  switch (verdict) {
    case HostKeyVerdict::mismatch:
      return "the SSH host key of " + host + " does not match its entry in " +
             known_hosts.string() + " (possible man-in-the-middle)";
    case HostKeyVerdict::revoked:
      return "the SSH host key of " + host + " is revoked in " + known_hosts.string();
    case HostKeyVerdict::unknown_host:
      return "the SSH host " + host + " is not listed in " + known_hosts.string();
    case HostKeyVerdict::trusted:
      break;
  }
  return {};
}

}  // namespace

int RemoteCallbacks::certificate_check(git_cert* cert, int valid, const char* host, void* payload) {
  auto& self = *static_cast<RemoteCallbacks*>(payload);
  const std::string host_name = host != nullptr ? host : self.location_.host;
  if (cert->cert_type == GIT_CERT_HOSTKEY_LIBSSH2) {
    return self.check_host_key(*reinterpret_cast<const git_cert_hostkey*>(cert), host_name);
  }
  if (valid != 0) return 0;
  return self.refuse(Failure::unreachable,
                     "the TLS certificate of " + host_name +
                         " is not trusted (give its CA bundle with --git-ca-file)",
                     GIT_ECERTIFICATE);
}

// Without --git-ssh-known-hosts every host key is accepted (libgit2 1.5 has
// no known_hosts check of its own); operators pin keys by giving the file.
int RemoteCallbacks::check_host_key(const git_cert_hostkey& key, const std::string& host) {
  if (config_.ssh_known_hosts.empty()) return 0;
  if ((key.type & GIT_CERT_SSH_RAW) == 0) {
    return refuse(Failure::unreachable,
                  "the SSH server " + host + " did not present a host key to check",
                  GIT_ECERTIFICATE);
  }
  const HostKeyVerdict verdict = check_known_host(config_.ssh_known_hosts, host, location_.port,
                                                  std::string_view(key.hostkey, key.hostkey_len));
  if (verdict == HostKeyVerdict::trusted) return 0;
  return refuse(Failure::unreachable, verdict_message(verdict, host, config_.ssh_known_hosts),
                GIT_ECERTIFICATE);
}

}  // namespace inflight::checkpoint
