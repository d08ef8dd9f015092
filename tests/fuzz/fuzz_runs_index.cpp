// Layout 2's index (runs_index.hpp) on any bytes, as a listing takes it from
// branches anyone with push access writes. The input is split at its first
// NUL: what comes before is the snapshot's segment of bucket 3b, what comes
// after is a log delta's entries.jsonl. Each line is read or left out with a
// problem; whatever is read is an entry of a valid run id, and an entry that
// only the snapshot names sits in its bucket. Each input's objects are removed
// after it, so that a long run does not fill the disk with loose objects.
#include <git2.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "inflight/core/branch_name.hpp"
#include "scratch_repo.hpp"
#include "store/runs_index.hpp"

namespace {

using namespace inflight::checkpoint;

using inflight::fuzz::check;

// A bare cache repo of this process's own, removed at its exit, with the objects every input
// shares: the layout file and the log's root.
struct Scratch : inflight::fuzz::ScratchRepo {
  git_oid layout{};
  git_oid log_root{};
  std::vector<git_oid> written;  // by this input, removed after it

  Scratch() : ScratchRepo("runs-index") {
    check(git_blob_create_from_buffer(&layout, repo, kRunsLayout.data(), kRunsLayout.size()));
    log_root = commit(tree({{"layout", layout, GIT_FILEMODE_BLOB}}), nullptr);
    written.clear();
  }

  struct Entry {
    const char* name;
    git_oid id;
    git_filemode_t mode;
  };
  git_oid blob(std::string_view text) {
    git_oid id;
    check(git_blob_create_from_buffer(&id, repo, text.data(), text.size()));
    written.push_back(id);
    return id;
  }
  git_oid tree(const std::vector<Entry>& entries) {
    git_treebuilder* builder = nullptr;
    check(git_treebuilder_new(&builder, repo, nullptr));
    for (const auto& e : entries)
      check(git_treebuilder_insert(nullptr, builder, e.name, &e.id, e.mode));
    git_oid id;
    check(git_treebuilder_write(&id, builder));
    git_treebuilder_free(builder);
    written.push_back(id);
    return id;
  }
  git_oid commit(const git_oid& tree_id, const git_oid* parent_id) {
    git_tree* t = nullptr;
    check(git_tree_lookup(&t, repo, &tree_id));
    git_commit* parent = nullptr;
    if (parent_id != nullptr) check(git_commit_lookup(&parent, repo, parent_id));
    const git_commit* parents[] = {parent};
    git_oid id;
    check(git_commit_create(&id, repo, nullptr, author, author, nullptr, "c", t,
                            parent != nullptr ? 1 : 0, parents));
    git_commit_free(parent);
    git_tree_free(t);
    written.push_back(id);
    return id;
  }
  // Removes the loose objects this input wrote; those every input shares stay.
  void forget() {
    for (const auto& id : written)
      if (!git_oid_equal(&id, &layout) && !git_oid_equal(&id, &log_root)) remove_object(id);
    written.clear();
  }
};

Scratch& scratch() {
  static Scratch s;
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto& s = scratch();
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto nul = input.find('\0');
  const auto segment = input.substr(0, nul);
  const auto delta = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);

  const auto bucket = s.tree({{"000001.jsonl", s.blob(segment), GIT_FILEMODE_BLOB}});
  const auto buckets = s.tree({{"3b", bucket, GIT_FILEMODE_TREE}});
  const auto snapshot =
      s.commit(s.tree({{"b", buckets, GIT_FILEMODE_TREE}, {"layout", s.layout, GIT_FILEMODE_BLOB}}),
               nullptr);
  const auto log = s.commit(s.tree({{"entries.jsonl", s.blob(delta), GIT_FILEMODE_BLOB},
                                    {"layout", s.layout, GIT_FILEMODE_BLOB}}),
                            &s.log_root);
  RunsIndex index;
  {
    CacheRepo cache(s.root / "cache.git");
    index = read_runs_index(
        cache, std::string(git_oid_tostr_s(&snapshot)),
        delta.empty() ? std::nullopt : std::optional(std::string(git_oid_tostr_s(&log))));
  }
  for (const auto& [id, entry] : index.entries) {
    if (id != entry.id || !is_valid_run_id(id) || entry.result != result_ref(id)) std::abort();
    if (delta.empty() && runs_bucket(id) != "3b") std::abort();
  }
  for (const auto& problem : index.problems)
    if (problem.empty()) std::abort();
  s.forget();
  return 0;
}
