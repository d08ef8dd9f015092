#include <algorithm>
#include <future>
#include <map>
#include <mutex>
#include <numeric>
#include <span>

#include "git/cache_lock.hpp"
#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"
#include "inflight/checkpoint/remote_url.hpp"
#include "inflight/core/branch_name.hpp"
#include "remote/batched_socket.hpp"
#include "remote/push_sources.hpp"
#include "remote/remote_callbacks.hpp"

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

// `refs/heads/inflight/p/r` -> `inflight/p/r`, the name under our own namespaces.
std::string short_name(const std::string& ref) {
  for (const std::string_view prefix : {"refs/heads/", "refs/"}) {
    if (ref.starts_with(prefix)) return ref.substr(prefix.size());
  }
  return ref;
}

bool is_valid_ref(const std::string& ref) {
  int valid = 0;
  if (git_reference_name_is_valid(&valid, ref.c_str()) < 0 || valid == 0 ||
      !ref.starts_with("refs/")) {
    git_error_clear();
    return false;
  }
  return true;
}

void require_valid_ref(const std::string& ref) {
  if (!is_valid_ref(ref)) throw GitError(Failure::other, "not a valid ref name: '" + ref + "'");
}

// Two writers of one results repo can trip each other for a moment. libgit2
// writes a local one itself: an agent deleting the last branch under a pod
// removes the directory another is writing a ref into, and a ref deleted
// while another agent lists them fails its listing. A server fails an update
// whose lock another push held. Tried again, on the tips listed anew, each
// lands or is judged taken; a lock left behind fails each time.
constexpr int kWriteTries = 3;

git_proxy_options environment_proxy() {
  git_proxy_options proxy = GIT_PROXY_OPTIONS_INIT;
  proxy.type = GIT_PROXY_AUTO;  // honours http.proxy and the *_proxy variables
  return proxy;
}

// Refspecs as libgit2 takes them, valid while the strings live.
class RefspecArray {
 public:
  explicit RefspecArray(std::vector<std::string>& specs) {
    for (auto& spec : specs) raw_.push_back(spec.data());
    array_ = {raw_.data(), raw_.size()};
  }
  RefspecArray(const RefspecArray&) = delete;
  RefspecArray& operator=(const RefspecArray&) = delete;
  const git_strarray* get() const { return &array_; }

 private:
  std::vector<char*> raw_;
  git_strarray array_{};
};

}  // namespace

// One ref update to send, as the index of its update and its refspec.
struct RefSend {
  std::size_t update;
  std::string refspec;
};

// A connection to push over: the sources it sends from, its callbacks and
// the tips the server advertised.
struct PushConnection {
  PushConnection(CacheRepo& cache, const RemoteConfig& config, const RemoteLocation& location)
      : sources(cache), callbacks(config, location) {}

  PushSources sources;
  RemoteCallbacks callbacks;
  git_remote_callbacks raw_callbacks = callbacks.callbacks();
  RemoteHandle remote;  // freed before the sources it pushes from
  std::map<std::string, git_oid> tips;
};

struct RemoteStore::Impl {
  CacheRepo& repo;
  RemoteConfig config;
  RemoteLocation location;
  // connect_ahead()'s connection until update() takes it. Last: its thread
  // reads the members above, and destroying it waits for that thread.
  std::future<std::unique_ptr<PushConnection>> ahead;

  git_repository* git() { return raw_repo(repo); }
  void connect(PushConnection& connection);
  std::unique_ptr<PushConnection> push_connection();
  // On the cache, or on the repository a push sends its sources from.
  RemoteHandle open_remote(git_repository* from = nullptr);
  void push_refspec(const std::string& refspec, const std::string& doing,
                    git_repository* from = nullptr);
  void delete_local_ref(const std::string& name);
  void download_missing(git_remote* remote, RemoteCallbacks& callbacks,
                        const std::vector<RemoteBranch>& branches);
  std::vector<RefSend> judge(PushConnection& connection, const std::vector<RefUpdate>& updates,
                             const std::vector<std::size_t>& which,
                             std::vector<RefResult>& results);
  void upload(PushConnection& connection, const std::vector<RefSend>& sends);
  // Connects and returns the refs the server advertised, valid while `remote`
  // stays connected; `raw_callbacks` (of `callbacks`) must live as long.
  std::span<const git_remote_head*> connect_and_list(git_remote* remote, RemoteCallbacks& callbacks,
                                                     const git_remote_callbacks& raw_callbacks,
                                                     git_direction direction);
  static bool may_write_again(const RefResult& failure, int attempt) {
    return failure.outcome == RefOutcome::unwritten && attempt < kWriteTries;
  }
  // Whether a connection that failed with `rc` is tried again: one to a
  // local results repo whose listing raced a deletion. libgit2 reports that
  // as GIT_ENOTFOUND or, from another step of the listing, as -1 with a
  // reference error ("reference '...' not found").
  bool may_connect_again(int rc, int attempt) const {
    const git_error* error = git_error_last();
    const bool raced =
        rc == GIT_ENOTFOUND || (error != nullptr && error->klass == GIT_ERROR_REFERENCE);
    return location.local_path && raced && attempt < kWriteTries;
  }
  // The ref is at the update's commit: the next save builds on it. A
  // deletion leaves the record (a result pruned is never published again).
  void landed(const RefUpdate& u) {
    if (!u.commit.empty())
      repo.remember_pushed(std::string(kLocalPrefix) + short_name(u.ref), u.commit);
  }
  // What landed stands if the cache cannot record it now: persist() tries
  // again, and the agent reports it if that fails too.
  void keep_pushed() {
    try {
      repo.keep_pushed();
    } catch (const GitError&) {
    }
  }
};

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
  git_check(git_remote_create_anonymous(&raw, from != nullptr ? from : git(), location.url.c_str()),
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
  if (tips == Tips::downloaded) impl_->download_missing(remote.get(), callbacks, branches);
  return branches;
}

// Over the connection that listed them, every listed run branch, lease and
// index tip the cache lacks, in one download (never a result). A failure of
// one ref's objects would fail them all: then each is fetched on its own when
// read (fetch_listed), and fails alone.
void RemoteStore::Impl::download_missing(git_remote* remote, RemoteCallbacks& callbacks,
                                         const std::vector<RemoteBranch>& branches) {
  const OdbHandle odb = open_odb(git());
  // One look for packs other agents wrote, not one per missing tip.
  if (git_odb_refresh(odb.get()) < 0) git_error_clear();
  std::vector<std::string> refspecs;
  for (const auto& branch : branches) {
    const git_oid oid = parse_oid(branch.oid);
    const bool read_by_restore = branch.ref.starts_with(kBranchPrefix) ||
                                 branch.ref.starts_with(kLeasePrefix) || branch.ref == kIndexRef;
    if (read_by_restore && git_odb_exists_ext(odb.get(), &oid, GIT_ODB_LOOKUP_NO_REFRESH) != 1 &&
        is_valid_ref(branch.ref))
      refspecs.push_back(branch.ref);
  }
  if (refspecs.empty()) return;
  const RefspecArray specs(refspecs);
  const CacheLock lock(repo.path(), CacheLock::Mode::shared);
  git_fetch_options options = GIT_FETCH_OPTIONS_INIT;
  options.callbacks = callbacks.callbacks();
  options.proxy_opts = environment_proxy();
  options.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
  if (const int rc = git_remote_download(remote, specs.get(), &options); rc < 0) {
    try {
      callbacks.throw_failure(rc, "download the listed branches from");
    } catch (const GitError& e) {
      if (e.network()) throw;
    }
  }
}

std::string RemoteStore::fetch(const std::string& ref) {
  require_valid_ref(ref);
  const std::string local = std::string(kFetchedPrefix) + short_name(ref);
  // A branch deleted remotely must not be answered from an earlier fetch.
  impl_->delete_local_ref(local);
  const RemoteHandle remote = impl_->open_remote();
  RemoteCallbacks callbacks(impl_->config, impl_->location);
  git_fetch_options options = GIT_FETCH_OPTIONS_INIT;
  options.callbacks = callbacks.callbacks();
  options.proxy_opts = environment_proxy();
  options.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
  options.update_fetchhead = 0;
  const std::string refspec = "+" + ref + ":" + local;
  char* refspecs[] = {const_cast<char*>(refspec.c_str())};
  const git_strarray specs{refspecs, 1};
  const CacheLock lock(impl_->repo.path(), CacheLock::Mode::shared);
  for (int attempt = 1;; ++attempt) {
    const int rc = git_remote_fetch(remote.get(), &specs, &options, nullptr);
    if (rc == 0) break;
    if (!impl_->may_connect_again(rc, attempt))
      callbacks.throw_failure(rc, "fetch " + ref + " from");
  }
  git_oid tip;
  if (git_reference_name_to_id(&tip, impl_->git(), local.c_str()) < 0) {
    git_error_clear();
    throw GitError(Failure::not_found, "no branch " + ref + " on " + display_url());
  }
  return oid_hex(tip);
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

namespace {

// Whether `commit` may replace `tip` fast-forward, judged here so that one
// taken ref fails alone (libgit2 fails a whole push on one non-fast-forward).
bool fast_forward(git_repository* git, const git_oid& tip, const git_oid& commit) {
  if (git_oid_equal(&tip, &commit)) return true;
  const OdbHandle odb = open_odb(git);
  if (git_odb_exists(odb.get(), &tip) != 1) return false;  // not ours: never pushed from here
  const int descends = git_graph_descendant_of(git, &commit, &tip);
  if (descends < 0) git_error_clear();
  return descends == 1;
}

}  // namespace

void RemoteStore::Impl::connect(PushConnection& connection) {
  connection.remote = open_remote(connection.sources.git());
  for (const git_remote_head* head : connect_and_list(connection.remote.get(), connection.callbacks,
                                                      connection.raw_callbacks, GIT_DIRECTION_PUSH))
    connection.tips.emplace(head->name, head->oid);
}

std::unique_ptr<PushConnection> RemoteStore::Impl::push_connection() {
  if (ahead.valid()) return ahead.get();
  auto connection = std::make_unique<PushConnection>(repo, config, location);
  connect(*connection);
  return connection;
}

// The push's sources are made here, on this thread; the other thread only
// connects their repository handle, which nothing else uses meanwhile.
void RemoteStore::connect_ahead() {
  auto connection = std::make_unique<PushConnection>(impl_->repo, impl_->config, impl_->location);
  impl_->ahead =
      std::async(std::launch::async, [impl = impl_.get(), c = std::move(connection)]() mutable {
        impl->connect(*c);
        return std::move(c);
      });
}

// The updates `which` judged on the advertised tips: the refspecs to send,
// and the result of each update that needs no push.
std::vector<RefSend> RemoteStore::Impl::judge(PushConnection& connection,
                                              const std::vector<RefUpdate>& updates,
                                              const std::vector<std::size_t>& which,
                                              std::vector<RefResult>& results) {
  const auto& tips = connection.tips;
  std::vector<RefSend> sends;
  for (const std::size_t i : which) {
    const auto& u = updates[i];
    require_valid_ref(u.ref);
    results[i] = {};  // a try before this one failed; this one judges anew
    const auto tip = tips.find(u.ref);
    const std::string tip_hex = tip == tips.end() ? "" : oid_hex(tip->second);
    if (!u.commit.empty() && tip_hex == u.commit) {  // there already: a retry's
      landed(u);
      continue;
    }
    if (u.from && tip_hex != *u.from) {
      results[i] = {RefOutcome::taken, tip == tips.end() ? "it is gone"
                                       : u.from->empty() ? "it holds " + tip_hex + " already"
                                                         : "it moved"};
      continue;
    }
    if (tip == tips.end() && u.result && tips.contains(*u.result)) {
      results[i] = {RefOutcome::taken, "it is gone, and the run is published (" + *u.result + ")"};
      continue;
    }
    if (u.commit.empty()) {  // a deletion; a ref already gone is deleted
      if (tip != tips.end()) sends.push_back({.update = i, .refspec = ":" + u.ref});
      continue;
    }
    const git_oid commit = parse_oid(u.commit);
    if (tip != tips.end() && !fast_forward(git(), tip->second, commit)) {
      results[i] = {RefOutcome::taken, "its tip " + oid_hex(tip->second) + " is another's"};
      continue;
    }
    sends.push_back({.update = i, .refspec = connection.sources.add(u.ref, commit) + ":" + u.ref});
  }
  return sends;
}

void RemoteStore::Impl::upload(PushConnection& connection, const std::vector<RefSend>& sends) {
  std::vector<std::string> refspecs;
  for (const auto& send : sends) refspecs.push_back(send.refspec);
  const RefspecArray specs(refspecs);
  git_push_options options = GIT_PUSH_OPTIONS_INIT;
  options.callbacks = connection.raw_callbacks;
  options.proxy_opts = environment_proxy();
  connection.callbacks.forget_refusals();
  if (const int rc = git_remote_upload(connection.remote.get(), specs.get(), &options); rc < 0)
    connection.callbacks.throw_failure(rc, "push to");
}

std::vector<RefResult> RemoteStore::update(const std::vector<RefUpdate>& updates) {
  const auto connection = impl_->push_connection();
  std::vector<RefResult> results(updates.size());
  const CacheLock lock(impl_->repo.path(), CacheLock::Mode::exclusive);
  std::vector<std::size_t> all(updates.size());
  std::iota(all.begin(), all.end(), 0);
  auto sends = impl_->judge(*connection, updates, all, results);
  for (int attempt = 1; !sends.empty(); ++attempt) {
    impl_->upload(*connection, sends);
    std::vector<std::size_t> again;
    for (const auto& send : sends) {
      const auto& u = updates[send.update];
      auto failure = connection->callbacks.failure_of(u.ref);
      if (!failure) {
        impl_->landed(u);
      } else {
        if (Impl::may_write_again(*failure, attempt)) again.push_back(send.update);
        results[send.update] = std::move(*failure);
      }
    }
    if (again.empty()) break;
    // Judged again on the tips as they are now: another agent that wrote a
    // ref meanwhile took it, and libgit2 would fail the whole push on it.
    // What landed stands if the listing fails: the rest stays unwritten.
    connection->tips.clear();
    try {
      impl_->connect(*connection);
    } catch (const GitError&) {
      break;
    }
    sends = impl_->judge(*connection, updates, again, results);
  }
  impl_->keep_pushed();
  return results;
}

void RemoteStore::remove(const std::string& ref) {
  require_valid_ref(ref);
  impl_->push_refspec(":" + ref, "delete " + ref + " from");
}

}  // namespace inflight::checkpoint
