// Layout 2's markers (docs/design/history-layout.md §3.2): objects whose bytes follow from a run
// id (and its final status) alone, so that any pod computes their ids without reading anything,
// and asks the server for one by id: whether the run was published, and how it ended. The archive
// keeps the markers of every published run reachable. Their bytes are fixed for good:
// `git hash-object` of the same bytes gives the same id (markers_test.cpp).
//
// A run's markers are trees, not commits. A server checks a wanted commit by walking its history
// from every ref, and a marker commit dated 0 comes last in a walk by date: each fold's push paid a
// walk of the whole archive in the server's connectivity check (2.2 s at 100,000 runs), and each
// lookup of an old run the same. git serves a tree by id without a walk, and checks a pushed tree
// by its own entries. No checkpoint can forge one: M(id) holds a submodule entry (a gitlink), which
// no run dir's snapshot ever writes, and S(id, status) holds M(id).
#pragma once

#include <git2.h>

#include <string>
#include <string_view>

namespace inflight::checkpoint {

// A marker's object type and bytes.
struct Marker {
  git_object_t type = GIT_OBJECT_TREE;
  std::string bytes;
};

// M(id): "this run id was published": a tree of one gitlink, `inflight published <id>`, at G.
Marker published_marker(std::string_view run_id);
// S(id, status): "… and ended `final_status`": a tree of one entry, the status, holding M(id).
Marker status_marker(std::string_view run_id, std::string_view final_status);
// Whether a run's id and final status make markers: status_marker() of them does not throw.
bool makes_markers(std::string_view run_id, std::string_view final_status);
// G: the archive's first commit, on the empty tree, dated 0, which the markers' gitlinks name.
Marker archive_genesis();
// K: a tree of one gitlink, `inflight archive`, at G, which every fold's tree holds (as
// kArchiveKnownEntry). A lookup fetches it by id to tell a server's "no" from a lost connection:
// an object of the markers' own type, since a server may serve commits by id and no tree.
Marker archive_known();
inline constexpr std::string_view kArchiveKnownEntry = ".archive";  // no run id starts with a dot

// The id git gives a marker's bytes.
git_oid marker_id(const Marker& marker);
// Writes `marker` to `repo`'s object database (G with its empty tree). A status marker needs M(id)
// written too: a pack of S(id, status) holds it.
git_oid write_marker(git_repository* repo, const Marker& marker);

}  // namespace inflight::checkpoint
