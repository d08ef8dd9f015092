// What remote_store.cpp and ref_updates.cpp share: the store's state and
// connection (RemoteStore::Impl), and the ref names they check.
#pragma once

#include <future>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/repo_objects.hpp"
#include "inflight/checkpoint/git_store.hpp"
#include "inflight/checkpoint/remote_url.hpp"
#include "remote/push_sources.hpp"
#include "remote/remote_callbacks.hpp"

namespace inflight::checkpoint {

// `refs/heads/inflight/p/r` -> `inflight/p/r`, the name under our own namespaces.
inline std::string short_name(const std::string& ref) {
  for (const std::string_view prefix : {"refs/heads/", "refs/"}) {
    if (ref.starts_with(prefix)) return ref.substr(prefix.size());
  }
  return ref;
}

inline bool is_valid_ref(const std::string& ref) {
  int valid = 0;
  if (git_reference_name_is_valid(&valid, ref.c_str()) < 0 || valid == 0 ||
      !ref.starts_with("refs/")) {
    git_error_clear();
    return false;
  }
  return true;
}

inline void require_valid_ref(const std::string& ref) {
  if (!is_valid_ref(ref)) throw GitError(Failure::other, "not a valid ref name: '" + ref + "'");
}

// Two writers of one results repo can trip each other for a moment. libgit2
// writes a local one itself: an agent deleting the last branch under a pod
// removes the directory another is writing a ref into, and a ref deleted
// while another agent lists them fails its listing. A server fails an update
// whose lock another push held. Tried again, on the tips listed anew, each
// lands or is judged taken; a lock left behind fails each time.
constexpr int kWriteTries = 3;

inline git_proxy_options environment_proxy() {
  git_proxy_options proxy = GIT_PROXY_OPTIONS_INIT;
  proxy.type = GIT_PROXY_AUTO;  // honours http.proxy and the *_proxy variables
  return proxy;
}

// A fetch's options: `callbacks` (which must outlive it), the environment's proxy, no tags.
inline git_fetch_options fetch_options(const git_remote_callbacks& callbacks) {
  git_fetch_options options = GIT_FETCH_OPTIONS_INIT;
  options.callbacks = callbacks;
  options.proxy_opts = environment_proxy();
  options.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
  return options;
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
  std::optional<std::string> fetch_to(const std::string& source, const std::string& local);
  void download_missing(git_remote* remote, RemoteCallbacks& callbacks,
                        const std::vector<RemoteBranch>& branches, RemoteStore::Tips tips);
  std::vector<RefSend> judge(PushConnection& connection, const std::vector<RefUpdate>& updates,
                             const std::vector<std::size_t>& which,
                             std::vector<RefResult>& results);
  void upload(PushConnection& connection, const std::vector<RefSend>& sends);
  // Connects and returns the refs the server advertised, valid while `remote`
  // stays connected; `raw_callbacks` (of `callbacks`) must live as long.
  std::span<const git_remote_head*> connect_and_list(git_remote* remote, RemoteCallbacks& callbacks,
                                                     const git_remote_callbacks& raw_callbacks,
                                                     git_direction direction);
  // How a fetch of one object by its id, into a throwaway repository, went. libgit2 1.5 drops
  // upload-pack's "ERR not our ref" (wait_while_ack reads past it) and reports the end of the
  // connection that follows, as it would a connection lost: the two are one outcome here.
  enum class ById { fetched, refused_or_lost, not_allowed };
  ById fetch_by_id(const std::string& object);
  // fetch_by_id() as an answer: `yes` (fetched), `unknown` (no want by id allowed), or nullopt
  // (refused, or the connection ended).
  std::optional<RemoteStore::Reachable> served(const std::string& object);
  RemoteStore::Reachable reachable(const std::string& object, const std::string& known);
  RemoteStore::Reachable archived(const std::string& run_id);
  // Whether layout 2's archive, advertised in `tips`, holds the marker of run `run_id`: a run
  // whose result ref went once it was folded. A lookup that cannot answer says so.
  std::optional<std::string> folded(const std::map<std::string, git_oid>& tips,
                                    const std::string& run_id);
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

}  // namespace inflight::checkpoint
