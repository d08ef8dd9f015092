#include "inflight/checkpoint/ssh_trust.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <vector>

#include "remote/base64.hpp"

namespace inflight::checkpoint {

namespace {

struct KnownHostLine {
  std::string marker;  // "", "@revoked" or "@cert-authority"
  std::string hosts;
  std::string key_blob;
};

std::optional<KnownHostLine> parse_line(const std::string& line) {
  std::istringstream fields(line);
  KnownHostLine parsed;
  std::string first, key_type, key_text;
  if (!(fields >> first) || first.front() == '#') return std::nullopt;
  if (first.front() == '@') {
    parsed.marker = first;
    if (!(fields >> first)) return std::nullopt;
  }
  parsed.hosts = first;
  if (!(fields >> key_type >> key_text)) return std::nullopt;
  const auto blob = decode_base64(key_text);
  if (!blob) return std::nullopt;
  parsed.key_blob = *blob;
  return parsed;
}

// `|1|base64(salt)|base64(HMAC-SHA1(salt, name))`, as written by HashKnownHosts.
bool hashed_host_matches(const std::string& field, const std::string& name) {
  const auto bar = field.find('|', 3);
  if (bar == std::string::npos) return false;
  const auto salt = decode_base64(field.substr(3, bar - 3));
  const auto hash = decode_base64(field.substr(bar + 1));
  if (!salt || !hash) return false;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  if (HMAC(EVP_sha1(), salt->data(), static_cast<int>(salt->size()),
           reinterpret_cast<const unsigned char*>(name.data()), name.size(), digest,
           &digest_len) == nullptr) {
    return false;
  }
  return std::string(reinterpret_cast<const char*>(digest), digest_len) == *hash;
}

// OpenSSH host patterns know only '*' and '?'; brackets are literal, as in
// `[host]:port`, so fnmatch would misread them.
bool wildcard_matches(std::string_view pattern, std::string_view name) {
  std::size_t p = 0, n = 0, star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool pattern_list_matches(const std::string& patterns, const std::string& name) {
  bool matched = false;
  std::istringstream list(patterns);
  for (std::string pattern; std::getline(list, pattern, ',');) {
    const bool negated = !pattern.empty() && pattern.front() == '!';
    if (negated) pattern.erase(0, 1);
    std::transform(pattern.begin(), pattern.end(), pattern.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (!wildcard_matches(pattern, name)) continue;
    if (negated) return false;
    matched = true;
  }
  return matched;
}

bool hosts_match(const std::string& hosts, const std::string& name) {
  if (hosts.starts_with("|1|")) return hashed_host_matches(hosts, name);
  return pattern_list_matches(hosts, name);
}

std::string known_hosts_name(std::string host, int port) {
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (port == 0 || port == 22) return host;
  return "[" + host + "]:" + std::to_string(port);
}

}  // namespace

HostKeyVerdict check_known_host(const std::filesystem::path& known_hosts, const std::string& host,
                                int port, std::string_view key_blob) {
  const std::string name = known_hosts_name(host, port);
  std::ifstream file(known_hosts);
  bool host_listed = false;
  bool key_listed = false;
  for (std::string text; std::getline(file, text);) {
    const auto line = parse_line(text);
    if (!line || line->marker == "@cert-authority" || !hosts_match(line->hosts, name)) continue;
    const bool same_key = line->key_blob == key_blob;
    if (line->marker == "@revoked") {
      if (same_key) return HostKeyVerdict::revoked;
      continue;
    }
    host_listed = true;
    key_listed = key_listed || same_key;
  }
  if (key_listed) return HostKeyVerdict::trusted;
  return host_listed ? HostKeyVerdict::mismatch : HostKeyVerdict::unknown_host;
}

}  // namespace inflight::checkpoint
