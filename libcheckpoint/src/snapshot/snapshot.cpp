// RunSnapshotter: a run dir hashed into a commit of the cache repo, leaving
// out what a restore would refuse (docs/checkpoints.md "What a checkpoint saves, a restore takes").
#include <fnmatch.h>
#include <sys/stat.h>

#include <cstring>
#include <map>

#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"
#include "inflight/checkpoint/tree_rules.hpp"
#include "inflight/core/bounded_json.hpp"
#include "snapshot/chunked_file.hpp"
#include "snapshot/run_dir_entries.hpp"
#include "snapshot/stat_cache.hpp"
#include "snapshot/stored_file.hpp"

namespace inflight::checkpoint {

namespace fs = std::filesystem;

namespace {

// Why an entry that was replaced or deleted between its stat and its open is
// left out; the next checkpoint takes what is there then.
constexpr const char* kChangedWhileRead = "changed while read";

// Whether a tree walk's `root` ("a/b/", "" at the top) is inside a chunked file's tree: one of
// its directories is named as chunk trees are (a restore reads only those as chunks).
bool in_chunk_tree(std::string_view root) {
  while (!root.empty()) {
    const auto slash = root.find('/');
    if (has_chunk_suffix(root.substr(0, slash))) return true;
    root.remove_prefix(slash == std::string_view::npos ? root.size() : slash + 1);
  }
  return false;
}

}  // namespace

struct RunSnapshotter::Impl {
  CacheRepo& repo;
  std::vector<std::string> exclude_globs;
  TreeLimits limits;
  fs::path run_dir;  // the dir the stat cache describes
  StatCache stat_cache;
  StatCache seen_now;  // becomes stat_cache after a snapshot
  LeftOut left_out;
  SnapshotStats stats;
  std::optional<TreeTally> tally;  // of the snapshot under way
  TreeHandle last_saved;           // the parent checkpoint's tree, if any

  git_repository* git() { return raw_repo(repo); }
  bool excluded(const std::string& name, const std::string& relative) const;
  std::optional<git_oid> write_dir(OpenDir& dir, const std::string& relative, int depth);
  void add_entry(git_treebuilder* tree, const OpenDir& dir, const std::string& name,
                 const std::string& relative, int depth);
  void add_dir(git_treebuilder* tree, const OpenDir& parent, const std::string& name,
               const std::string& relative, const struct stat& st, int depth);
  void add_file(git_treebuilder* tree, const OpenDir& dir, const std::string& name,
                const std::string& relative, const struct stat& st);
  std::optional<StoredFile> stored_version(const OpenDir& dir, const std::string& name,
                                           const std::string& relative, const struct stat& st);
  void count(const std::string& relative, std::uint64_t bytes);
  void keep_last_saved(git_treebuilder* tree, const std::string& relative, const std::string& why);
  void count_kept(const std::string& relative, const git_tree_entry* entry);
  void insert_entry(git_treebuilder* tree, const std::string& name, const std::string& relative,
                    const git_oid& oid, git_filemode_t mode);
  git_oid write_root(const fs::path& dir);
};

bool RunSnapshotter::Impl::excluded(const std::string& name, const std::string& relative) const {
  for (const auto& glob : exclude_globs) {
    if (fnmatch(glob.c_str(), name.c_str(), 0) == 0) return true;
    if (fnmatch(glob.c_str(), relative.c_str(), 0) == 0) return true;
  }
  return false;
}

// libgit2 refuses a few names the rules let through (`git~1`, `.git.` and
// other spellings of `.git` on NTFS and HFS+): such an entry is left out too.
void RunSnapshotter::Impl::insert_entry(git_treebuilder* tree, const std::string& name,
                                        const std::string& relative, const git_oid& oid,
                                        git_filemode_t mode) {
  const int code = git_treebuilder_insert(nullptr, tree, name.c_str(), &oid, mode);
  if (code == 0) return;
  const git_error* error = git_error_last();
  const bool bad_name = error != nullptr && error->klass == GIT_ERROR_TREE &&
                        std::strstr(error->message, "invalid name") != nullptr;
  if (!bad_name) throw_git_error(code, "add " + relative);
  left_out.add(relative, "git refuses the name");
}

// The kept tree is judged as a restore would judge it, from lstat sizes
// before any byte is read: a run dir over the limits fails its checkpoint.
void RunSnapshotter::Impl::count(const std::string& relative, std::uint64_t bytes) {
  tally->add_entry();
  tally->add_bytes(bytes);
  if (auto rule = tally->over_limit()) {
    throw GitError(Failure::over_limit, "run dir over the restore limits at '" +
                                            printable(relative) + "': " + *rule +
                                            " (--restore-max-files, --restore-max-bytes)");
  }
}

// The file as it is now: the cached version when its stat is unchanged, else
// read afresh through a descriptor; nullopt when the entry changed between
// its stat and its open. It is counted before any byte is read.
std::optional<StoredFile> RunSnapshotter::Impl::stored_version(const OpenDir& dir,
                                                               const std::string& name,
                                                               const std::string& relative,
                                                               const struct stat& st) {
  const FileStat seen = file_stat_of(st);
  const auto cached = stat_cache.find(relative);
  const StoredFile* previous = cached == stat_cache.end() ? nullptr : &cached->second;
  if (previous != nullptr && previous->stat == seen) {
    count(relative, seen.size);
    ++stats.files_unchanged;
    return *previous;
  }
  auto fd = open_file_entry(dir, name, st);
  if (!fd) return std::nullopt;
  count(relative, seen.size);
  return store_file(repo, std::move(*fd), relative, seen, previous, stats);
}

void RunSnapshotter::Impl::add_file(git_treebuilder* tree, const OpenDir& dir,
                                    const std::string& name, const std::string& relative,
                                    const struct stat& st) {
  if (auto rule = file_size_refusal(static_cast<std::uint64_t>(st.st_size), limits))
    return left_out.add(relative, *rule);
  auto stored = stored_version(dir, name, relative, st);
  if (!stored) return left_out.add(relative, kChangedWhileRead);
  if (stored->chunked()) {
    insert_entry(tree, name + std::string(kChunkSuffix), relative, stored->entry,
                 GIT_FILEMODE_TREE);
  } else {
    insert_entry(tree, name, relative, stored->entry,
                 stored->executable() ? GIT_FILEMODE_BLOB_EXECUTABLE : GIT_FILEMODE_BLOB);
  }
  seen_now.insert_or_assign(relative, std::move(*stored));
}

void RunSnapshotter::Impl::add_dir(git_treebuilder* tree, const OpenDir& parent,
                                   const std::string& name, const std::string& relative,
                                   const struct stat& st, int depth) {
  // A restore would read such a directory as a chunked file.
  if (has_chunk_suffix(name))
    return left_out.add(relative, "directory name ends in " + std::string(kChunkSuffix));
  if (auto rule = depth_refusal(depth)) return left_out.add(relative, *rule);
  auto dir = open_dir_entry(parent, name, st);
  if (!dir) return left_out.add(relative, kChangedWhileRead);
  const auto sub = write_dir(*dir, relative, depth);
  if (!sub) return;
  count(relative, 0);
  insert_entry(tree, name, relative, *sub, GIT_FILEMODE_TREE);
}

// The rules of tree_rules.hpp, each judged from fstatat before anything is
// opened; what is opened must still be what was judged (run_dir_entries.hpp).
void RunSnapshotter::Impl::add_entry(git_treebuilder* tree, const OpenDir& dir,
                                     const std::string& name, const std::string& relative,
                                     int depth) {
  if (auto rule = name_refusal(name)) return left_out.add(relative, *rule);
  try {
    const auto st = stat_entry(dir, name);
    if (!st) return;  // deleted since the directory was listed
    const EntryKind kind = entry_kind_of_mode(st->st_mode);
    if (auto rule = kind_refusal(kind)) return left_out.add(relative, *rule);
    if (kind == EntryKind::file) return add_file(tree, dir, name, relative, *st);
    add_dir(tree, dir, name, relative, *st, depth + 1);
  } catch (const EntryUnreadable& e) {
    keep_last_saved(tree, relative, e.what());
  }
}

namespace {

bool is_file_or_dir(git_filemode_t mode) {
  return mode == GIT_FILEMODE_BLOB || mode == GIT_FILEMODE_BLOB_EXECUTABLE ||
         mode == GIT_FILEMODE_TREE;
}

// Whether `entry` is what a checkpoint writes: files and directories of files. The last checkpoint
// is a branch tip anyone with push access may have written: a gitlink there (which layout 2's
// markers hold) or a link is not kept.
bool holds_only_files(git_repository* git, const git_tree_entry* entry) {
  if (!is_file_or_dir(git_tree_entry_filemode(entry))) return false;
  if (git_tree_entry_type(entry) != GIT_OBJECT_TREE) return true;
  bool only_files = true;
  const auto check = [](const char*, const git_tree_entry* e, void* payload) {
    if (is_file_or_dir(git_tree_entry_filemode(e))) return 0;
    *static_cast<bool*>(payload) = false;
    return -1;
  };
  const TreeHandle tree = lookup_tree(git, *git_tree_entry_id(entry));
  const int code = git_tree_walk(tree.get(), GIT_TREEWALK_PRE, check, &only_files);
  if (code < 0 && only_files) throw_git_error(code, "read a last saved directory");
  git_error_clear();
  return only_files;
}

}  // namespace

// An entry we may not read (a child's chmod 000) keeps the version the last checkpoint saved,
// if it had one, and the rest of the run is saved: the run loses nothing it had
// (docs/checkpoints.md "What a checkpoint saves, a restore takes").
void RunSnapshotter::Impl::keep_last_saved(git_treebuilder* tree, const std::string& relative,
                                           const std::string& why) {
  TreeEntryHandle saved;
  if (last_saved) {
    for (const auto& path : {relative, relative + std::string(kChunkSuffix)}) {
      git_tree_entry* raw = nullptr;
      if (git_tree_entry_bypath(&raw, last_saved.get(), path.c_str()) == 0) {
        saved.reset(raw);
        break;
      }
      git_error_clear();
    }
  }
  if (!saved) return left_out.add(relative, why + "; never saved before");
  if (!holds_only_files(git(), saved.get()))
    return left_out.add(relative, why + "; its last saved version holds what no checkpoint writes");
  count_kept(relative, saved.get());
  insert_entry(tree, git_tree_entry_name(saved.get()), relative, *git_tree_entry_id(saved.get()),
               git_tree_entry_filemode(saved.get()));
  left_out.add(relative, why + "; its last saved version is kept");
}

// The kept entry is judged by the restore limits as a read one is: each file and directory one
// entry, with its bytes; the chunks of a chunked file are bytes of that one file.
void RunSnapshotter::Impl::count_kept(const std::string& relative, const git_tree_entry* entry) {
  struct Walk {
    git_odb* odb;
    std::uint64_t bytes = 0;
    std::uint64_t entries = 0;
    int error = 0;
  };
  const OdbHandle odb = open_odb(git());
  Walk walk{odb.get()};
  const auto add = [](const char* root, const git_tree_entry* e, void* payload) {
    auto& w = *static_cast<Walk*>(payload);
    if (!in_chunk_tree(root)) ++w.entries;
    if (git_tree_entry_type(e) != GIT_OBJECT_BLOB) return 0;
    std::size_t size = 0;
    git_object_t type{};
    w.error = git_odb_read_header(&size, &type, w.odb, git_tree_entry_id(e));
    w.bytes += size;
    return w.error;
  };
  if (git_tree_entry_type(entry) == GIT_OBJECT_TREE) {
    const TreeHandle kept = lookup_tree(git(), *git_tree_entry_id(entry));
    const int code = git_tree_walk(kept.get(), GIT_TREEWALK_PRE, add, &walk);
    git_check(code, "read the last saved " + relative);
    // A chunked file is one file: its chunks are no entries of their own.
    if (has_chunk_suffix(git_tree_entry_name(entry))) walk.entries = 0;
  } else {
    git_check(add("", entry, &walk), "read the last saved " + relative);
    walk.entries = 0;
  }
  for (std::uint64_t i = 0; i < walk.entries; ++i) tally->add_entry();
  count(relative, walk.bytes);
}

// `depth`: how many directories `dir` is below the run dir.
std::optional<git_oid> RunSnapshotter::Impl::write_dir(OpenDir& dir, const std::string& relative,
                                                       int depth) {
  git_treebuilder* raw = nullptr;
  git_check(git_treebuilder_new(&raw, git(), nullptr), "create tree");
  const TreeBuilderHandle tree(raw);
  while (auto name = dir.next_name()) {
    const std::string entry_relative = relative.empty() ? *name : relative + "/" + *name;
    if (!excluded(*name, entry_relative)) add_entry(tree.get(), dir, *name, entry_relative, depth);
  }
  if (git_treebuilder_entrycount(tree.get()) == 0) return std::nullopt;  // git stores no empty dirs
  git_oid oid;
  git_check(git_treebuilder_write(&oid, tree.get()), "write tree " + relative);
  return oid;
}

git_oid RunSnapshotter::Impl::write_root(const fs::path& dir) {
  if (dir != run_dir) stat_cache = load_stat_cache(repo, dir);
  run_dir = dir;
  left_out = {};
  stats = {};
  seen_now.clear();
  tally.emplace(limits);
  OpenDir top = open_run_dir(dir);
  std::optional<git_oid> root = write_dir(top, "", 0);
  // Files gone from the run dir leave the cache too.
  stat_cache = std::move(seen_now);
  return root ? *root : empty_tree(git());
}

RunSnapshotter::RunSnapshotter(CacheRepo& repo, std::vector<std::string> exclude_globs,
                               TreeLimits limits)
    : impl_(std::make_unique<Impl>(
          Impl{repo, std::move(exclude_globs), limits, {}, {}, {}, {}, {}, std::nullopt, {}})) {}
RunSnapshotter::~RunSnapshotter() = default;
RunSnapshotter::RunSnapshotter(RunSnapshotter&&) noexcept = default;

std::optional<std::string> RunSnapshotter::snapshot(const fs::path& run_dir,
                                                    const CheckpointInfo& info,
                                                    const std::optional<std::string>& parent) {
  const CommitHandle parent_commit = parent ? lookup_commit(impl_->git(), *parent) : CommitHandle();
  impl_->last_saved = parent_commit ? tree_of(parent_commit.get()) : TreeHandle();
  const git_oid tree = impl_->write_root(run_dir);
  // Only a periodic save of an unchanged dir is skipped. Every other reason
  // marks a change of hands: a claim is the compare-and-swap token of a new
  // owner, a shutdown tip says the owner let the run go (so the next pod may
  // take it at once), a final one that the run is over.
  if (parent_commit && git_oid_equal(git_commit_tree_id(parent_commit.get()), &tree) &&
      info.reason == CheckpointReason::periodic) {
    return std::nullopt;
  }
  return oid_hex(
      write_commit(impl_->repo, tree, parent_commit.get(), write_checkpoint_message(info)));
}

void RunSnapshotter::keep_stat_cache() {
  if (!impl_->run_dir.empty()) save_stat_cache(impl_->repo, impl_->run_dir, impl_->stat_cache);
}

const LeftOut& RunSnapshotter::left_out() const {
  return impl_->left_out;
}
const SnapshotStats& RunSnapshotter::last_stats() const {
  return impl_->stats;
}

}  // namespace inflight::checkpoint
