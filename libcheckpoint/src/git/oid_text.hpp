// Object ids as text, read from a remote or a user and so checked, and
// written for messages and the agent protocol.
#pragma once

#include <git2.h>

#include <string>
#include <string_view>

namespace inflight::checkpoint {

// A full 40-hex object id; anything else is GitError(not_found) because
// callers pass ids they read from a remote or from a user.
git_oid parse_oid(const std::string& hex);
// Whether `text` is a full object id as git writes one (40 lowercase hex).
bool is_oid_hex(std::string_view text);
std::string oid_hex(const git_oid& oid);

}  // namespace inflight::checkpoint
