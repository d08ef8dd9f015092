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

// git's empty tree, named by every marker.
constexpr std::string_view kEmptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

// At time 0 on the empty tree: a marker's id depends on its parent and message alone.
std::string marker(const std::vector<std::string>& parents, const std::string& message) {
  return commit_bytes(kEmptyTree, parents, 0, message + "\n");
}

// A final status is a short word: succeeded, failed, cancelled.
constexpr std::size_t kMaxStatusBytes = 32;

bool is_status_word(std::string_view status) {
  return !status.empty() && status.size() <= kMaxStatusBytes &&
         status.find_first_not_of("abcdefghijklmnopqrstuvwxyz") == std::string::npos;
}

// A marker's words become a commit's bytes: they must not break its lines.
void check_word(std::string_view what, std::string_view word, bool valid) {
  if (!valid)
    throw GitError(Failure::other, "no marker for " + std::string(what) + " '" +
                                       printable(std::string(word)) + "'");
}

}  // namespace

std::string published_marker(std::string_view run_id) {
  check_word("run id", run_id, is_valid_run_id(run_id));
  return marker({}, "inflight published " + std::string(run_id));
}

std::string status_marker(std::string_view run_id, std::string_view final_status) {
  check_word("final status", final_status, is_status_word(final_status));
  return marker({oid_hex(marker_id(published_marker(run_id)))},
                "inflight published " + std::string(run_id) + " " + std::string(final_status));
}

bool makes_markers(std::string_view run_id, std::string_view final_status) {
  return is_valid_run_id(run_id) && is_status_word(final_status);
}

std::string archive_genesis() {
  return marker({}, "inflight archive");
}

git_oid marker_id(std::string_view marker) {
  git_oid oid;
  git_check(git_odb_hash(&oid, marker.data(), marker.size(), GIT_OBJECT_COMMIT), "hash marker");
  return oid;
}

git_oid write_marker(git_repository* repo, std::string_view marker) {
  const OdbHandle odb = open_odb(repo);
  git_oid oid;
  git_check(git_odb_write(&oid, odb.get(), "", 0, GIT_OBJECT_TREE), "write the empty tree");
  git_check(git_odb_write(&oid, odb.get(), marker.data(), marker.size(), GIT_OBJECT_COMMIT),
            "write marker");
  return oid;
}

}  // namespace inflight::checkpoint
