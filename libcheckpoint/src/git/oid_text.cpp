#include "git/oid_text.hpp"

#include "inflight/checkpoint/git_store.hpp"

namespace inflight::checkpoint {

git_oid parse_oid(const std::string& hex) {
  git_oid oid;
  if (hex.size() != GIT_OID_HEXSZ || git_oid_fromstr(&oid, hex.c_str()) < 0) {
    git_error_clear();
    throw GitError(Failure::not_found, "not an object id: '" + hex + "'");
  }
  return oid;
}

bool is_oid_hex(std::string_view text) {
  return text.size() == GIT_OID_HEXSZ &&
         text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::string oid_hex(const git_oid& oid) {
  char text[GIT_OID_HEXSZ + 1];
  git_oid_tostr(text, sizeof text, &oid);
  return text;
}

}  // namespace inflight::checkpoint
