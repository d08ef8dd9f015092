// Object ids as text, read from a remote or a user and so checked, and
// written for messages and the agent protocol.
#pragma once

#include <git2.h>

#include <string>

namespace inflight::checkpoint {

// A full 40-hex object id; anything else is GitError(not_found) because
// callers pass ids they read from a remote or from a user.
git_oid parse_oid(const std::string& hex);
std::string oid_hex(const git_oid& oid);

}  // namespace inflight::checkpoint
