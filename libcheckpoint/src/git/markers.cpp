// See markers.hpp.
#include "git/markers.hpp"

#include <vector>

#include "git/git_error.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"
#include "inflight/core/bounded_json.hpp"
#include "inflight/core/branch_name.hpp"

namespace inflight::checkpoint {

namespace {

// git's empty tree, named by G.
constexpr std::string_view kEmptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
constexpr std::string_view kGitlinkMode = "160000";
constexpr std::string_view kTreeMode = "40000";

// A final status is a short word: succeeded, failed, cancelled.
constexpr std::size_t kMaxStatusBytes = 32;

bool is_status_word(std::string_view status) {
  return !status.empty() && status.size() <= kMaxStatusBytes &&
         status.find_first_not_of("abcdefghijklmnopqrstuvwxyz") == std::string::npos;
}

// A marker's words become a tree entry's name: they must not hold a NUL or a slash.
void check_word(std::string_view what, std::string_view word, bool valid) {
  if (!valid)
    throw GitError(Failure::other, "no marker for " + std::string(what) + " '" +
                                       printable(std::string(word)) + "'");
}

// The bytes of a tree of one entry.
Marker tree_of_one(std::string_view mode, std::string_view name, const git_oid& target) {
  std::string bytes;
  bytes.append(mode).append(" ").append(name).push_back('\0');
  bytes.append(reinterpret_cast<const char*>(target.id), GIT_OID_RAWSZ);
  return {.type = GIT_OBJECT_TREE, .bytes = std::move(bytes)};
}

}  // namespace

Marker published_marker(std::string_view run_id) {
  check_word("run id", run_id, is_valid_run_id(run_id));
  return tree_of_one(kGitlinkMode, "inflight published " + std::string(run_id),
                     marker_id(archive_genesis()));
}

Marker status_marker(std::string_view run_id, std::string_view final_status) {
  check_word("final status", final_status, is_status_word(final_status));
  return tree_of_one(kTreeMode, final_status, marker_id(published_marker(run_id)));
}

bool makes_markers(std::string_view run_id, std::string_view final_status) {
  return is_valid_run_id(run_id) && is_status_word(final_status);
}

Marker archive_genesis() {
  return {.type = GIT_OBJECT_COMMIT,
          .bytes = commit_bytes(kEmptyTree, {}, 0, "inflight archive\n")};
}

Marker archive_known() {
  return tree_of_one(kGitlinkMode, "inflight archive", marker_id(archive_genesis()));
}

git_oid marker_id(const Marker& marker) {
  git_oid oid;
  git_check(git_odb_hash(&oid, marker.bytes.data(), marker.bytes.size(), marker.type),
            "hash marker");
  return oid;
}

git_oid write_marker(git_repository* repo, const Marker& marker) {
  const OdbHandle odb = open_odb(repo);
  git_oid oid;
  if (marker.type == GIT_OBJECT_COMMIT)
    git_check(git_odb_write(&oid, odb.get(), "", 0, GIT_OBJECT_TREE), "write the empty tree");
  git_check(git_odb_write(&oid, odb.get(), marker.bytes.data(), marker.bytes.size(), marker.type),
            "write marker");
  return oid;
}

}  // namespace inflight::checkpoint
