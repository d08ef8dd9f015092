// libssh2 1.10 signs only with ssh-rsa (SHA-1), which OpenSSH 8.8+ refuses;
// spotting an RSA key lets an authentication failure say why.
#include <arpa/inet.h>

#include <cstdint>
#include <cstring>
#include <fstream>

#include "inflight/checkpoint/ssh_trust.hpp"
#include "remote/base64.hpp"

namespace inflight::checkpoint {

namespace {

constexpr std::string_view kOpenSshMagic{"openssh-key-v1\0", 15};

// Reads one SSH wire-format string (uint32 length, bytes) from `data`.
std::optional<std::string_view> take_string(std::string_view& data) {
  if (data.size() < 4) return std::nullopt;
  std::uint32_t length = 0;
  std::memcpy(&length, data.data(), 4);
  length = ntohl(length);
  data.remove_prefix(4);
  if (data.size() < length) return std::nullopt;
  const std::string_view value = data.substr(0, length);
  data.remove_prefix(length);
  return value;
}

// The key type in the (unencrypted) public part of an OpenSSH private key.
std::optional<std::string> openssh_key_type(std::string_view key) {
  if (!key.starts_with(kOpenSshMagic)) return std::nullopt;
  key.remove_prefix(kOpenSshMagic.size());
  for (int skipped = 0; skipped < 3; ++skipped) {  // cipher, kdf name, kdf options
    if (!take_string(key)) return std::nullopt;
  }
  if (key.size() < 4) return std::nullopt;
  key.remove_prefix(4);  // number of keys
  auto public_key = take_string(key);
  if (!public_key) return std::nullopt;
  const auto type = take_string(*public_key);
  if (!type) return std::nullopt;
  return std::string(*type);
}

bool is_rsa_key(std::istream& file) {
  std::string line;
  std::getline(file, line);
  if (line.starts_with("-----BEGIN RSA PRIVATE KEY-----")) return true;
  if (!line.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----")) return false;
  std::string body;
  while (std::getline(file, line) && !line.starts_with("-----END")) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    body += line;
  }
  const auto decoded = decode_base64(body);
  return decoded && openssh_key_type(*decoded) == "ssh-rsa";
}

}  // namespace

std::optional<std::string> rsa_key_limitation(const std::filesystem::path& private_key) {
  std::ifstream file(private_key);
  if (!file || !is_rsa_key(file)) return std::nullopt;
  return "the SSH key " + private_key.string() +
         " is an RSA key: libssh2 1.10 cannot sign with RSA keys for modern OpenSSH servers "
         "(rsa-sha2-256/512 are not supported and ssh-rsa SHA-1 signatures are disabled "
         "server-side); ed25519 and ecdsa keys work";
}

}  // namespace inflight::checkpoint
