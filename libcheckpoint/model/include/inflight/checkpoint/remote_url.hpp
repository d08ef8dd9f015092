// What inflight needs to know about a results-repo URL before connecting.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace inflight::checkpoint {

struct RemoteLocation {
  std::string url;      // as handed to libgit2 (local paths made absolute)
  std::string display;  // the URL without any password, for messages
  std::optional<std::filesystem::path> local_path;  // plain paths and file:// URLs
  std::string host;                                 // network URLs only
  int port = 0;                                     // 0 when the URL names none
  bool over_ssh = false;  // ssh://, its aliases and scp-like `user@host:path`
  std::string password;   // from the URL's userinfo, to scrub from messages

  // `message` with the URL's password and `token` replaced by "***".
  std::string scrub(std::string message, const std::string& token) const;
};

// Accepts a path, file://, git://, http(s)://, ssh:// and scp-like
// `user@host:path`.
RemoteLocation parse_remote_url(const std::string& url);

}  // namespace inflight::checkpoint
