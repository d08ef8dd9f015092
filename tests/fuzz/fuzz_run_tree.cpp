// A checkpoint's tree on any bytes, as a restore takes it from a branch that
// anyone with push access writes: validated (tree_validation.hpp) and, once
// accepted, written to a run dir (materialize.hpp). The input is the raw
// root tree object; the target first writes a few objects whose ids the seeds
// name (a text blob, an empty one, a directory holding the text), so that
// entries point at something. The tree is refused with a GitError that names
// why, or written; either way nothing lands outside the run dir, and no
// symlink inside it. Each input's tree and commit are removed after it, so
// that a long run does not fill the disk with loose objects.
#include <git2.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "inflight/checkpoint/store_types.hpp"
#include "scratch_repo.hpp"
#include "snapshot/materialize.hpp"
#include "snapshot/tree_validation.hpp"

namespace {

namespace fs = std::filesystem;
using namespace inflight::checkpoint;

using inflight::fuzz::check;

// A bare cache repo and a place for run dirs, this process's own, removed at its exit.
struct Scratch : inflight::fuzz::ScratchRepo {
  git_oid seeds[3];  // text, empty, directory: kept across inputs

  Scratch() : ScratchRepo("run-tree") {
    auto& [text, empty, directory] = seeds;
    check(git_blob_create_from_buffer(&text, repo, "line 1\nline 2\n", 14));
    check(git_blob_create_from_buffer(&empty, repo, "", 0));
    git_treebuilder* builder = nullptr;
    check(git_treebuilder_new(&builder, repo, nullptr));
    check(git_treebuilder_insert(nullptr, builder, "a.txt", &text, GIT_FILEMODE_BLOB));
    check(git_treebuilder_write(&directory, builder));
    git_treebuilder_free(builder);
  }

  // Removes the loose object `id` wrote, unless it is a seed.
  void forget(const git_oid& id) const {
    for (const auto& seed : seeds)
      if (git_oid_equal(&seed, &id)) return;
    remove_object(id);
  }
};

Scratch& scratch() {
  static Scratch s;
  return s;
}

// The input written as a tree, and its commit: both ids are zero when libgit2 cannot read the
// input as a tree.
struct Written {
  git_oid tree{};
  git_oid commit{};
};

Written write_tree_and_commit(const std::uint8_t* data, std::size_t size) {
  auto& s = scratch();
  Written written;
  git_odb* odb = nullptr;
  check(git_repository_odb(&odb, s.repo));
  check(git_odb_write(&written.tree, odb, data, size, GIT_OBJECT_TREE));
  git_odb_free(odb);
  git_tree* tree = nullptr;
  if (git_tree_lookup(&tree, s.repo, &written.tree) != 0) return written;
  if (git_commit_create(&written.commit, s.repo, nullptr, s.author, s.author, nullptr, "checkpoint",
                        tree, 0, nullptr) != 0)
    written.commit = {};
  git_tree_free(tree);
  return written;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto& s = scratch();
  const auto written = write_tree_and_commit(data, size);
  const auto run_dir = s.root / "runs" / "run";
  std::error_code ignored;
  fs::remove_all(s.root / "runs", ignored);
  if (!git_oid_is_zero(&written.commit)) {
    try {
      const ValidatedCommit validated(s.repo, git_oid_tostr_s(&written.commit),
                                      {.max_bytes = 1 << 20, .max_files = 64});
      materialize_tree(s.repo, validated, run_dir, "a.txt");
    } catch (const GitError& refused) {
      if (std::string_view(refused.what()).empty()) std::abort();
    }
  }
  s.forget(written.tree);
  if (!git_oid_is_zero(&written.commit)) s.forget(written.commit);
  for (const auto& entry : fs::directory_iterator(s.root))
    if (entry.path().filename() != "cache.git" && entry.path().filename() != "runs") std::abort();
  for (const auto& entry : fs::recursive_directory_iterator(s.root / "runs", ignored))
    if (entry.is_symlink()) std::abort();
  return 0;
}
