// The git side of checkpoints: a local cache repository that holds snapshot
// commits, and a remote (the results repo) that branches are pushed to,
// listed, fetched and deleted from. Synchronous; every call may block on the
// network, so callers bound network calls with a deadline of their own.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "inflight/checkpoint/store_types.hpp"

namespace inflight::checkpoint {

// Must exist (once per process) before any other call here.
class GitLibrary {
 public:
  GitLibrary();
  ~GitLibrary();
  GitLibrary(const GitLibrary&) = delete;
  GitLibrary& operator=(const GitLibrary&) = delete;
};

// A bare repository on local disk that holds snapshot objects and the
// fetched tips of branches; created (with its parent dirs) on first use, and
// created afresh when what is there is not a repository. Failures to open or
// write it are GitError(cache): this disk cannot checkpoint. Objects written
// through it stay in memory, readable and pushable, until persist() writes
// them to disk as one pack; without it they are gone with the CacheRepo.
// One CacheRepo, and everything built on it, belongs to one thread at a time
// (libgit2 repository handles are not thread-safe); threads that work in
// parallel each open their own CacheRepo on the same path.
class CacheRepo {
 public:
  explicit CacheRepo(const std::filesystem::path& path);
  ~CacheRepo();
  CacheRepo(CacheRepo&&) noexcept;
  CacheRepo& operator=(CacheRepo&&) noexcept;

  const std::filesystem::path& path() const;
  // Throws GitError(cache) when a small file cannot be written beside it.
  void check_writable();
  // Writes the commits made through this cache since the last persist(),
  // with the objects they brought, to disk as one pack; throws
  // GitError(cache) when it cannot (they stay in memory then).
  void persist();
  // Whether the object `oid` (hex) is in the cache, in memory or on disk.
  bool contains(const std::string& oid);
  // Why each pack downloaded since the last call went to libgit2's indexer
  // instead of ours (docs/checkpoints.md "How checkpoints are stored").
  std::vector<std::string> take_pack_handovers();
  // Points the cache's `ref` at `commit` (the tip a push left on the
  // remote, for the next save to build on) once the commit is on disk:
  // keep_pushed() packs every such ref in one write, persist() those whose
  // commits it writes. No ref of the cache ever names an object that is only
  // in memory: another process would find it dangling.
  void remember_pushed(const std::string& ref, const std::string& commit);
  void keep_pushed();
  // Drops `ref`'s record, as remember_pushed() sets one.
  void forget_pushed(const std::string& ref);
  // The commit `ref` names, as remember_pushed() left it (in any agent).
  std::optional<std::string> pushed_tip(const std::string& ref);
  // Every record whose ref starts with `prefix`, and its commit, as pushed_tip() reads them.
  std::map<std::string, std::string> pushed_under(const std::string& prefix);
  struct Impl;
  Impl& impl();

 private:
  std::unique_ptr<Impl> impl_;
};

// What the last snapshot() had to do; lets callers and tests see that the
// stat cache spared unchanged files from being read.
struct SnapshotStats {
  std::uint64_t files_unchanged = 0;  // stat matched the cache: not opened
  std::uint64_t files_read = 0;       // opened and (partly) hashed
  std::uint64_t bytes_read = 0;       // file content read from disk
};

// Builds snapshot commits of one run dir. Keeps a stat cache between calls,
// and in the cache repo between processes (keep_stat_cache()), so that an
// unchanged file is never read again, and stores files over 64 KiB as trees
// of 32 KiB chunk blobs (`<name>.inflight-chunks/000000`, ...) so that
// appending to a big file costs objects proportional to the append. What a
// restore would refuse (tree_rules.hpp) is left out of the commit, and a run
// dir still over `limits` once it is left out fails with
// GitError(over_limit), judged from lstat before a byte is read.
class RunSnapshotter {
 public:
  // exclude_globs are fnmatch patterns matched against each entry's base name
  // and its path relative to the run dir.
  RunSnapshotter(CacheRepo& repo, std::vector<std::string> exclude_globs, TreeLimits limits = {});
  ~RunSnapshotter();
  RunSnapshotter(RunSnapshotter&&) noexcept;

  // A commit of run_dir whose parent is `parent` (none for the first), or
  // nullopt for a "periodic" one whose tree equals the parent's tree: every
  // other reason is a change of hands and always makes a commit.
  std::optional<std::string> snapshot(const std::filesystem::path& run_dir,
                                      const CheckpointInfo& info,
                                      const std::optional<std::string>& parent);

  // Writes the stat cache of the last snapshot() into the cache repo, for
  // the next process; only once CacheRepo::persist() put its objects on disk.
  void keep_stat_cache();

  // The entries the last snapshot() left out, each with the rule it breaks
  // (excluded ones are not among them).
  const LeftOut& left_out() const;
  const SnapshotStats& last_stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class RemoteStore {
 public:
  RemoteStore(CacheRepo& repo, RemoteConfig config);
  ~RemoteStore();

  // Whether list() also downloads the listed tips the cache lacks: those of run branches and
  // leases, with the indexes' (both layouts') or without (a listing of unfinished runs reads no
  // finished one), or without them where layout 2's log and archive are both listed (a restore,
  // which then looks runs up instead of reading the log);
  // or layout 1's index alone, unless the repo keeps layout 2's log (a publish's look at the
  // layout).
  enum class Tips {
    listed,
    downloaded,
    downloaded_but_index,
    downloaded_unless_archived,
    flat_index
  };
  // The refs under `prefix`, sorted; with Tips::downloaded, each listed run
  // branch, lease and index tip can be read from the cache afterwards (one
  // connection for both). Results are never downloaded.
  std::vector<RemoteBranch> list(const std::string& prefix = "refs/heads/inflight/",
                                 Tips tips = Tips::listed);
  // Fetches `ref` into the cache repo and returns its tip.
  std::string fetch(const std::string& ref);
  // The listed tip, fetched only when the cache lacks it: a commit in the
  // cache comes with every object it reaches.
  std::string fetch_listed(const RemoteBranch& branch);
  // Fetches `commit` (hex) by its id, unless the cache holds it: a result whose ref layout 2
  // deleted once the archive reached it. The server must allow reachable wants, as for
  // reachable(); one that does not fails the fetch (GitError).
  std::string fetch_commit(const std::string& commit);
  // The tip this cache last pushed to `ref`, if it remembers one.
  std::optional<std::string> last_pushed(const std::string& ref);
  // Fast-forward only; a rejected ref throws GitError(rejected), one a local
  // results repo could not write GitError(other).
  void push(const std::string& ref, const std::string& oid);
  // Every update over one connection, each ref judged on its own: a taken or
  // refused ref does not hold the others back. Throws only for what fails
  // the whole connection (unreachable, credentials).
  std::vector<RefResult> update(const std::vector<RefUpdate>& updates);
  // Opens the next update()'s connection on another thread, so that its
  // round trips overlap the work that decides the updates (a restore's
  // download and run dirs). Its failure is update()'s.
  void connect_ahead();
  // Deletes the remote branch; a refused deletion throws as push() does.
  void remove(const std::string& ref);
  // Whether the results repo serves `object` (hex) by its id: layout 2's lookup of a marker
  // (docs/design/history-layout.md §3.4), asked by fetching it. A server allows that with
  // uploadpack.allowReachableSHA1InWant or allowAnySHA1InWant; `unknown`: it allows neither. git
  // then serves a commit that one of its refs reaches, and a tree or blob whenever it stores it
  // (its check walks commits only); a local path answers the same. libgit2 1.5 reports a refused
  // want as a connection that ended, so `known`, a small object of the same type that the caller
  // knows is there (the marker every fold holds), is fetched after a refusal: served, `object` was
  // not there. A connection lost during the first fetch only reads as a refusal too, a "no": a
  // publish then goes ahead, which makes a second result only when the same run was also published
  // and folded elsewhere, and its ref deleted. A server that serves only its tips by id, or no tree
  // by id, refuses both fetches: a GitError. The fetches go to a throwaway repository beside the
  // cache, never into it (libgit2 skips a want the cache has, so a positive would outlive a prune),
  // and are given up past 64 KiB: a marker is a few hundred bytes. A local results repo is asked
  // directly (libgit2's local transport ignores wants and sends all the refs reach). Throws
  // GitError when the server cannot be asked.
  enum class Reachable { yes, no, unknown };
  Reachable reachable(const std::string& object, const std::string& known);
  // Whether layout 2's archive holds run `run_id`: reachable() of its publish marker, with the
  // marker every fold holds as the object known to be there.
  Reachable archived(const std::string& run_id);
  // Whether the server serves layout 2's markers by id, in one fetch: of K, which every fold holds.
  // `yes`, or `unknown` where it allows no want by id; a GitError where it refused (a server that
  // serves no tree by id) or the connection ended: libgit2 tells the two apart no more than for
  // reachable().
  Reachable serves_markers();
  // How run `run_id` ended, by its status markers: the first of succeeded, failed and cancelled
  // whose S(id, status) the server serves; nullopt when none is, or the server cannot say.
  std::optional<std::string> archived_status(const std::string& run_id);
  // The remote URL with any password removed, for messages and logs.
  const std::string& display_url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes the tree of `commit` into run_dir, refusing anything that would land
// outside it, a name that is not UTF-8, or a tree over the limits
// (GitError(hostile_tree)); reassembles chunked files.
void materialize(CacheRepo& repo, const std::string& commit, const std::filesystem::path& run_dir,
                 const TreeLimits& limits);

// The contents of one file of a commit's run dir (e.g. run-params.json), if
// present; GitError(over_limit) past `max_bytes`, before more is read (the
// commit may be a branch's, not yet validated).
std::optional<std::string> read_file_at(CacheRepo& repo, const std::string& commit,
                                        const std::string& path, std::uint64_t max_bytes);

// The complete lines of one file of a commit's run dir, read from the cache
// when the file is one blob (0 when there is no such file, as a run dir
// without it counts); nullopt when it is chunked, too large to read twice.
std::optional<std::uint64_t> lines_of_blob_at(CacheRepo& repo, const std::string& commit,
                                              const std::string& path);

// One commit of the cache repo.
CommitSummary commit_summary(CacheRepo& repo, const std::string& commit);

// First-parent history from `commit`, newest first.
std::vector<CommitSummary> history(CacheRepo& repo, const std::string& commit);

}  // namespace inflight::checkpoint
