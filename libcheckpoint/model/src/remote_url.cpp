#include "inflight/checkpoint/remote_url.hpp"

#include <charconv>

#include "inflight/checkpoint/store_types.hpp"

namespace inflight::checkpoint {

namespace {

void replace_all(std::string& text, const std::string& secret) {
  if (secret.empty()) return;
  for (auto at = text.find(secret); at != std::string::npos; at = text.find(secret, at + 3)) {
    text.replace(at, secret.size(), "***");
  }
}

void split_host_port(const std::string& host_port, RemoteLocation& location) {
  std::string::size_type colon = host_port.rfind(':');
  if (!host_port.empty() && host_port.front() == '[') {  // [IPv6]:port
    const auto close = host_port.find(']');
    location.host = host_port.substr(1, close == std::string::npos ? std::string::npos : close - 1);
    colon = close == std::string::npos ? std::string::npos : host_port.find(':', close);
  } else {
    location.host = host_port.substr(0, colon);
  }
  if (colon != std::string::npos) {
    const char* digits = host_port.data() + colon + 1;
    std::from_chars(digits, host_port.data() + host_port.size(), location.port);
  }
}

RemoteLocation parse_scheme_url(const std::string& url, std::string::size_type scheme_end) {
  RemoteLocation location;
  const std::string scheme = url.substr(0, scheme_end);
  const std::string rest = url.substr(scheme_end + 3);
  if (scheme == "file") {
    location.url = location.display = url;
    location.local_path = rest;
    return location;
  }
  const auto slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  const std::string path = slash == std::string::npos ? "" : rest.substr(slash);
  const auto at = authority.rfind('@');
  std::string user;
  if (at != std::string::npos) {
    const std::string userinfo = authority.substr(0, at);
    const auto colon = userinfo.find(':');
    user = userinfo.substr(0, colon) + "@";
    if (colon != std::string::npos) location.password = userinfo.substr(colon + 1);
  }
  const std::string host_port = at == std::string::npos ? authority : authority.substr(at + 1);
  split_host_port(host_port, location);
  location.url = url;
  location.display = scheme + "://" + user + host_port + path;
  location.over_ssh = scheme == "ssh" || scheme == "ssh+git" || scheme == "git+ssh";
  return location;
}

// `[user@]host:path` with no slash before the colon, as git reads it.
bool is_scp_like(const std::string& url) {
  const auto colon = url.find(':');
  return colon != std::string::npos && colon > 0 && url.find('/') > colon;
}

}  // namespace

std::string RemoteLocation::scrub(std::string message, const std::string& token) const {
  replace_all(message, password);
  replace_all(message, token);
  return message;
}

RemoteLocation parse_remote_url(const std::string& url) {
  if (const auto scheme_end = url.find("://"); scheme_end != std::string::npos) {
    return parse_scheme_url(url, scheme_end);
  }
  RemoteLocation location;
  if (is_scp_like(url)) {
    const std::string user_host = url.substr(0, url.find(':'));
    const auto at = user_host.rfind('@');
    location.host = at == std::string::npos ? user_host : user_host.substr(at + 1);
    location.url = location.display = url;
    location.over_ssh = true;
    return location;
  }
  location.local_path = std::filesystem::absolute(url).lexically_normal();
  location.url = location.display = location.local_path->string();
  return location;
}

std::string display_url(const std::string& url) {
  return parse_remote_url(url).display;
}

}  // namespace inflight::checkpoint
