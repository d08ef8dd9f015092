// Layout 2's marker commits (docs/design/history-layout.md §3.2): commits whose bytes follow from
// a run id (and its final status) alone, so that any pod computes their ids without reading
// anything, and asks the server whether one is reachable: whether the run was published, and how
// it ended. The archive keeps the markers of every published run reachable. Their bytes are fixed
// for good: `git hash-object -t commit` of the same text gives the same id (markers_test.cpp).
#pragma once

#include <git2.h>

#include <string>
#include <string_view>

namespace inflight::checkpoint {

// M(id): "this run id was published", on the empty tree, with no parent.
std::string published_marker(std::string_view run_id);
// S(id, status): "… and ended `final_status`", with M(id) as its parent.
std::string status_marker(std::string_view run_id, std::string_view final_status);
// Whether a run's id and final status make markers: status_marker() of them does not throw.
bool makes_markers(std::string_view run_id, std::string_view final_status);
// G: the archive's first commit.
std::string archive_genesis();

// The id git gives a marker's bytes.
git_oid marker_id(std::string_view marker);
// Writes `marker`, and the empty tree it names, to `repo`'s object database.
git_oid write_marker(git_repository* repo, std::string_view marker);

}  // namespace inflight::checkpoint
