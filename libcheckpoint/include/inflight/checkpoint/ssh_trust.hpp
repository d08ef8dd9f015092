// SSH checks that need no connection: which known_hosts entry vouches for a
// server's host key, and whether a private key is one libssh2 1.10 cannot use.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace inflight::checkpoint {

enum class HostKeyVerdict {
  trusted,       // an entry for the host carries exactly this key
  mismatch,      // the host has entries, none with this key
  unknown_host,  // no entry names the host
  revoked,       // a @revoked entry carries this key
};

// `key_blob` is the server's raw public key (SSH wire format, as in the
// base64 field of known_hosts). Plain, wildcard, negated, `[host]:port` and
// hashed (`|1|salt|hash`) host patterns are understood; @cert-authority lines
// are ignored (no certificate support). A file that cannot be read matches
// nothing.
HostKeyVerdict check_known_host(const std::filesystem::path& known_hosts, const std::string& host,
                                int port, std::string_view key_blob);

// When `private_key` is an RSA key (PEM `BEGIN RSA PRIVATE KEY`, or the
// OpenSSH format with key type ssh-rsa), the explanation to add to an
// authentication failure; nullopt for other keys or an unreadable file.
std::optional<std::string> rsa_key_limitation(const std::filesystem::path& private_key);

}  // namespace inflight::checkpoint
