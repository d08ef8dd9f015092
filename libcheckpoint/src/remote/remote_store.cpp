// RemoteStore (git_store.hpp): the connection to the results repo, its
// listing, fetches and single pushes; ref_updates.cpp: batched ref updates.
#include <stdlib.h>

#include <algorithm>
#include <future>
#include <map>
#include <mutex>
#include <numeric>
#include <span>

#include "git/cache_lock.hpp"
#include "git/cache_repo_impl.hpp"
#include "git/cache_sweep.hpp"
#include "git/git_error.hpp"
#include "git/markers.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"
#include "inflight/checkpoint/remote_url.hpp"
#include "inflight/core/branch_name.hpp"
#include "remote/batched_socket.hpp"
#include "remote/push_sources.hpp"
#include "remote/remote_callbacks.hpp"
#include "remote/remote_store_impl.hpp"

namespace inflight::checkpoint {

namespace {

constexpr std::string_view kFetchedPrefix = "refs/inflight-fetched/";

// The CA bundle is a process-wide libgit2 setting; set it before the first
// connection and again only if another store names another file.
void use_ca_file(const std::filesystem::path& ca_file) {
  static std::mutex mutex;
  static std::filesystem::path current;
  if (ca_file.empty()) return;
  const std::lock_guard lock(mutex);
  if (ca_file == current) return;
  git_check(git_libgit2_opts(GIT_OPT_SET_SSL_CERT_LOCATIONS, ca_file.c_str(), nullptr),
            "load CA file " + ca_file.string());
  current = ca_file;
}

}  // namespace

std::span<const git_remote_head*> RemoteStore::Impl::connect_and_list(
    git_remote* remote, RemoteCallbacks& callbacks, const git_remote_callbacks& raw_callbacks,
    git_direction direction) {
  const git_proxy_options proxy = environment_proxy();
  for (int attempt = 1;; ++attempt) {
    const int rc = git_remote_connect(remote, direction, &raw_callbacks, &proxy, nullptr);
    if (rc == 0) break;
    if (!may_connect_again(rc, attempt)) callbacks.throw_failure(rc, "connect to");
  }
  const git_remote_head** heads = nullptr;
  std::size_t count = 0;
  if (const int rc = git_remote_ls(&heads, &count, remote); rc < 0)
    callbacks.throw_failure(rc, "list branches of");
  return {heads, count};
}

RemoteHandle RemoteStore::Impl::open_remote(git_repository* from) {
  use_batched_sockets(!location.over_ssh);
  git_remote* raw = nullptr;
  // The URL is the one the command line gave: a gitconfig's url.*.insteadOf
  // does not rewrite it (and libgit2 1.5 leaks a regex match per config
  // entry it tries).
  git_remote_create_options options = GIT_REMOTE_CREATE_OPTIONS_INIT;
  options.repository = from != nullptr ? from : git();
  options.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF;
  git_check(git_remote_create_with_opts(&raw, location.url.c_str(), &options),
            "use remote " + location.display);
  return RemoteHandle(raw);
}

void RemoteStore::Impl::push_refspec(const std::string& refspec, const std::string& doing,
                                     git_repository* from) {
  const RemoteHandle remote = open_remote(from);
  RemoteCallbacks callbacks(config, location);
  git_push_options options = GIT_PUSH_OPTIONS_INIT;
  options.callbacks = callbacks.callbacks();
  options.proxy_opts = environment_proxy();
  char* refspecs[] = {const_cast<char*>(refspec.c_str())};
  const git_strarray specs{refspecs, 1};
  const auto ref = refspec.substr(refspec.rfind(':') + 1);
  for (int attempt = 1;; ++attempt) {
    callbacks.forget_refusals();
    if (const int rc = git_remote_push(remote.get(), &specs, &options); rc < 0) {
      if (may_connect_again(rc, attempt)) continue;
      callbacks.throw_failure(rc, doing);
    }
    const auto failure = callbacks.failure_of(ref);
    if (!failure || !may_write_again(*failure, attempt)) break;
  }
  // A server-side refusal (hook, denyNonFastForwards) arrives here, with rc 0.
  callbacks.check_push_accepted(doing);
}

void RemoteStore::Impl::delete_local_ref(const std::string& name) {
  git_reference* raw = nullptr;
  const int rc = git_reference_lookup(&raw, git(), name.c_str());
  const ReferenceHandle ref(raw);
  if (rc == GIT_ENOTFOUND) return git_error_clear();
  git_check(rc, "look up " + name);
  git_check(git_reference_delete(ref.get()), "delete " + name);
}

RemoteStore::RemoteStore(CacheRepo& repo, RemoteConfig config)
    : impl_(std::make_unique<Impl>(Impl{repo, std::move(config), {}, {}})) {
  impl_->location = parse_remote_url(impl_->config.url);
  // The default results repo is a local path that exists once we made it.
  if (impl_->location.local_path && !std::filesystem::exists(*impl_->location.local_path)) {
    open_or_init_bare(*impl_->location.local_path);
  }
  use_ca_file(impl_->config.ca_file);
}

RemoteStore::~RemoteStore() = default;

const std::string& RemoteStore::display_url() const {
  return impl_->location.display;
}

std::vector<RemoteBranch> RemoteStore::list(const std::string& prefix, Tips tips) {
  const RemoteHandle remote = impl_->open_remote();
  RemoteCallbacks callbacks(impl_->config, impl_->location);
  const git_remote_callbacks raw_callbacks = callbacks.callbacks();
  const auto heads =
      impl_->connect_and_list(remote.get(), callbacks, raw_callbacks, GIT_DIRECTION_FETCH);
  std::vector<RemoteBranch> branches;
  for (const git_remote_head* head : heads) {
    const std::string name = head->name;
    if (name.starts_with(prefix) && !name.ends_with("^{}")) {
      branches.push_back(RemoteBranch{name, oid_hex(head->oid)});
    }
  }
  // Servers advertise refs in no promised order; callers and people want one.
  std::sort(branches.begin(), branches.end(),
            [](const RemoteBranch& a, const RemoteBranch& b) { return a.ref < b.ref; });
  if (tips != Tips::listed) impl_->download_missing(remote.get(), callbacks, branches, tips);
  return branches;
}

// Over the connection that listed them, every listed tip `tips` asks for that
// the cache lacks, in one download (never a result). A failure of one ref's
// objects would fail them all: then each is fetched on its own when read
// (fetch_listed), and fails alone.
void RemoteStore::Impl::download_missing(git_remote* remote, RemoteCallbacks& callbacks,
                                         const std::vector<RemoteBranch>& branches, Tips tips) {
  const auto listed = [&](std::string_view name) {
    return std::any_of(branches.begin(), branches.end(),
                       [&](const RemoteBranch& ref) { return ref.ref == name; });
  };
  const bool log = listed(kRunsLogRef);
  const bool indexes = tips == Tips::downloaded ||
                       (tips == Tips::downloaded_unless_archived && !(log && listed(kArchiveRef)));
  const auto wanted = [&](const std::string& ref) {
    if (tips == Tips::flat_index) return ref == kIndexRef && !log;
    return ref.starts_with(kBranchPrefix) || ref.starts_with(kLeasePrefix) ||
           (indexes && (ref == kIndexRef || ref == kRunsLogRef || ref == kRunsRef));
  };
  const OdbHandle odb = open_odb(git());
  // One look for packs other agents wrote, not one per missing tip.
  if (git_odb_refresh(odb.get()) < 0) git_error_clear();
  std::vector<std::string> refspecs;
  for (const auto& branch : branches) {
    const git_oid oid = parse_oid(branch.oid);
    if (wanted(branch.ref) && git_odb_exists_ext(odb.get(), &oid, GIT_ODB_LOOKUP_NO_REFRESH) != 1 &&
        is_valid_ref(branch.ref))
      refspecs.push_back(branch.ref);
  }
  if (refspecs.empty()) return;
  const RefspecArray specs(refspecs);
  const CacheLock lock(repo.path(), CacheLock::Mode::shared);
  git_fetch_options options = fetch_options(callbacks.callbacks());
  if (const int rc = git_remote_download(remote, specs.get(), &options); rc < 0) {
    try {
      callbacks.throw_failure(rc, "download the listed branches from");
    } catch (const GitError& e) {
      if (e.network()) throw;
    }
  }
}

// Fetches `source` (a ref, or a commit id) to the cache's ref `local`: its tip, or nullopt
// when the server has no such ref.
std::optional<std::string> RemoteStore::Impl::fetch_to(const std::string& source,
                                                       const std::string& local) {
  // A branch deleted remotely must not be answered from an earlier fetch.
  delete_local_ref(local);
  const RemoteHandle remote = open_remote();
  RemoteCallbacks callbacks(config, location);
  git_fetch_options options = fetch_options(callbacks.callbacks());
  options.update_fetchhead = 0;
  const std::string refspec = "+" + source + ":" + local;
  char* refspecs[] = {const_cast<char*>(refspec.c_str())};
  const git_strarray specs{refspecs, 1};
  const CacheLock lock(repo.path(), CacheLock::Mode::shared);
  for (int attempt = 1;; ++attempt) {
    const int rc = git_remote_fetch(remote.get(), &specs, &options, nullptr);
    if (rc == 0) break;
    if (!may_connect_again(rc, attempt)) callbacks.throw_failure(rc, "fetch " + source + " from");
  }
  git_oid tip;
  if (git_reference_name_to_id(&tip, git(), local.c_str()) == 0) return oid_hex(tip);
  git_error_clear();
  return std::nullopt;
}

std::string RemoteStore::fetch(const std::string& ref) {
  require_valid_ref(ref);
  const std::string local = std::string(kFetchedPrefix) + short_name(ref);
  auto tip = impl_->fetch_to(ref, local);
  if (!tip) throw GitError(Failure::not_found, "no branch " + ref + " on " + display_url());
  return std::move(*tip);
}

std::string RemoteStore::fetch_commit(const std::string& commit) {
  const git_oid oid = parse_oid(commit);
  if (git_odb_exists(open_odb(impl_->git()).get(), &oid) == 1) return commit;
  if (!impl_->fetch_to(commit, std::string(kFetchedPrefix) + "by-id/" + commit))
    throw GitError(Failure::not_found, "no commit " + commit + " on " + display_url());
  return commit;
}

std::string RemoteStore::fetch_listed(const RemoteBranch& branch) {
  const OdbHandle odb = open_odb(impl_->git());
  const git_oid oid = parse_oid(branch.oid);
  if (git_odb_exists(odb.get(), &oid) == 1) return branch.oid;
  return fetch(branch.ref);
}

std::optional<std::string> RemoteStore::last_pushed(const std::string& ref) {
  return impl_->repo.pushed_tip(std::string(kLocalPrefix) + short_name(ref));
}

namespace {

// What a lookup may download: a marker (two small trees, or G and its empty tree), in a pack.
constexpr std::size_t kMaxLookupBytes = 64 * 1024;

// A bare repository under the cache's `inflight-lookup/`, removed with this (and, left behind by
// a killed agent, by the next cache sweep).
class LookupRepo {
 public:
  explicit LookupRepo(const std::filesystem::path& cache) {
    const auto parent = cache / kLookupDir;
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    std::string path = (parent / "XXXXXX").string();
    if (ec || ::mkdtemp(path.data()) == nullptr)
      throw GitError(Failure::cache, "cannot make a lookup repository in " + parent.string());
    path_ = path;
    try {
      repo_ = open_or_init_bare(path_);
    } catch (...) {
      remove();
      throw;
    }
  }
  ~LookupRepo() {
    repo_ = {};
    remove();
  }
  LookupRepo(const LookupRepo&) = delete;
  LookupRepo& operator=(const LookupRepo&) = delete;
  git_repository* git() const { return repo_.get(); }
  bool holds(const std::string& object) const {
    const git_oid oid = parse_oid(object);
    return git_odb_exists(open_odb(repo_.get()).get(), &oid) == 1;
  }

 private:
  void remove() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::filesystem::path path_;
  RepositoryHandle repo_;
};

// A local results repo is asked directly: libgit2's local transport ignores the wants of a fetch
// and sends everything the refs reach. As a server does, it serves an object that is no commit
// whenever it stores it, and a commit only where its refs reach it.
RemoteStore::Reachable reachable_in(const std::filesystem::path& path, const std::string& object) {
  const RepositoryHandle repo = open_bare(path);
  const git_oid oid = parse_oid(object);
  std::size_t size = 0;
  git_object_t type = GIT_OBJECT_INVALID;
  if (const int code = git_odb_read_header(&size, &type, open_odb(repo.get()).get(), &oid)) {
    if (code != GIT_ENOTFOUND) throw_git_error(code, "look up " + object + " in " + path.string());
    git_error_clear();
    return RemoteStore::Reachable::no;
  }
  if (type != GIT_OBJECT_COMMIT) return RemoteStore::Reachable::yes;
  std::vector<git_oid> tips;
  git_reference_iterator* raw = nullptr;
  git_check(git_reference_iterator_new(&raw, repo.get()), "list the refs of " + path.string());
  const ReferenceIteratorHandle refs(raw);
  for (git_reference* ref = nullptr; git_reference_next(&ref, refs.get()) == 0;) {
    const ReferenceHandle owned(ref);
    if (const git_oid* target = git_reference_target(ref)) tips.push_back(*target);
  }
  git_error_clear();
  const int found = git_graph_reachable_from_any(repo.get(), &oid, tips.data(), tips.size());
  // A commit whose history is missing is stored, not reached: what the refs reach is whole.
  if (found == GIT_ENOTFOUND) {
    git_error_clear();
    return RemoteStore::Reachable::no;
  }
  if (found < 0) throw_git_error(found, "look up " + object + " in " + path.string());
  return found == 1 ? RemoteStore::Reachable::yes : RemoteStore::Reachable::no;
}

}  // namespace

RemoteStore::Impl::ById RemoteStore::Impl::fetch_by_id(const std::string& object) {
  const LookupRepo lookup(repo.path());
  const RemoteHandle remote = open_remote(lookup.git());
  RemoteCallbacks callbacks(config, location);
  callbacks.limit_download(kMaxLookupBytes);
  git_fetch_options options = fetch_options(callbacks.callbacks());
  // A server that cannot be reached fails here, apart from a refusal.
  connect_and_list(remote.get(), callbacks, options.callbacks, GIT_DIRECTION_FETCH);
  const std::string refspec = object + ":refs/lookup";
  char* refspecs[] = {const_cast<char*>(refspec.c_str())};
  const git_strarray specs{refspecs, 1};
  const int rc = git_remote_download(remote.get(), &specs, &options);
  if (rc == 0) {
    if (lookup.holds(object)) return ById::fetched;
    throw GitError(Failure::other, "look up " + object + " on " + location.display +
                                       ": the fetch brought no such object");
  }
  const git_error* error = git_error_last();
  const std::string_view message = error != nullptr ? error->message : "";
  if (message.find("cannot fetch a specific object") != std::string_view::npos)
    return ById::not_allowed;  // the server advertised no wants by id
  // A refusal ends the connection before any byte of a pack; anything else (a pack that came,
  // a failure of ours) is no refusal, and no "no".
  const bool ended = rc == GIT_EEOF || (error != nullptr && error->klass == GIT_ERROR_NET);
  if (!ended || callbacks.failed() || callbacks.received())
    callbacks.throw_failure(rc, "look up " + object + " on");
  return ById::refused_or_lost;
}

RemoteStore::Reachable RemoteStore::reachable(const std::string& object, const std::string& known) {
  return impl_->reachable(object, known);
}

RemoteStore::Reachable RemoteStore::Impl::reachable(const std::string& object,
                                                    const std::string& known) {
  parse_oid(object);
  parse_oid(known);
  if (location.local_path) return reachable_in(*location.local_path, object);
  if (const auto answer = served(object)) return *answer;
  if (const auto answer = served(known))  // the server answers, and did not serve `object`
    return *answer == Reachable::yes ? Reachable::no : *answer;
  throw GitError(Failure::unreachable, "look up " + object + " on " + location.display +
                                           ": the connection ended before an answer, twice");
}

std::optional<RemoteStore::Reachable> RemoteStore::Impl::served(const std::string& object) {
  switch (fetch_by_id(object)) {
    case Impl::ById::fetched:
      return Reachable::yes;
    case Impl::ById::not_allowed:
      return Reachable::unknown;
    case Impl::ById::refused_or_lost:
      break;
  }
  return std::nullopt;
}

RemoteStore::Reachable RemoteStore::archived(const std::string& run_id) {
  return impl_->archived(run_id);
}

std::optional<std::string> RemoteStore::archived_status(const std::string& run_id) {
  const auto known = oid_hex(marker_id(archive_known()));
  for (const std::string_view status : {"succeeded", "failed", "cancelled"})
    if (impl_->reachable(oid_hex(marker_id(status_marker(run_id, status))), known) ==
        Reachable::yes)
      return std::string(status);
  return std::nullopt;
}

RemoteStore::Reachable RemoteStore::serves_markers() {
  const auto known = oid_hex(marker_id(archive_known()));
  const auto& location = impl_->location;
  if (location.local_path) return reachable_in(*location.local_path, known);
  if (const auto answer = impl_->served(known)) return *answer;
  throw GitError(Failure::unreachable, "look up the archive's marker " + known + " on " +
                                           location.display + ": refused, or the connection ended");
}

RemoteStore::Reachable RemoteStore::Impl::archived(const std::string& run_id) {
  return reachable(oid_hex(marker_id(published_marker(run_id))),
                   oid_hex(marker_id(archive_known())));
}

std::optional<std::string> RemoteStore::Impl::folded(const std::map<std::string, git_oid>& tips,
                                                     const std::string& run_id) {
  if (!tips.contains(std::string(kArchiveRef))) return std::nullopt;
  try {
    switch (archived(run_id)) {
      case Reachable::yes:
        return "the archive holds its result";
      case Reachable::unknown:
        return "the archive may hold its result: the server allows no lookup by id";
      case Reachable::no:
        return std::nullopt;
    }
  } catch (const GitError& e) {
    return std::string("the archive may hold its result: ") + e.what();
  }
  return std::nullopt;
}

void RemoteStore::push(const std::string& ref, const std::string& oid) {
  require_valid_ref(ref);
  const CacheLock lock(impl_->repo.path(), CacheLock::Mode::exclusive);
  PushSources sources(impl_->repo);
  // No '+': the push is fast-forward only, so a moved tip fences us out.
  impl_->push_refspec(sources.add(ref, parse_oid(oid)) + ":" + ref, "push " + ref + " to",
                      sources.git());
  impl_->landed({.ref = ref, .commit = oid, .from = {}});
  impl_->keep_pushed();
}

}  // namespace inflight::checkpoint
