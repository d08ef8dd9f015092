// RemoteStore's ref updates: each judged on the tips the server advertised
// (taken, refused, unwritten) so that one fails alone, then one push for the
// rest, over a connection made ahead when asked (git_store.hpp).
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
#include "remote/remote_store_impl.hpp"

namespace inflight::checkpoint {

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

bool is_commit(git_repository* git, const git_oid& oid) {
  const OdbHandle odb = open_odb(git);
  std::size_t size = 0;
  git_object_t type = GIT_OBJECT_INVALID;
  if (git_odb_read_header(&size, &type, odb.get(), &oid) < 0) git_error_clear();
  return type == GIT_OBJECT_COMMIT;
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
    if (u.build && !u.commit.empty())
      throw GitError(Failure::other, "an update of " + u.ref + " names a commit and builds one");
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
    // Layout 2 deletes a result ref once the archive reached it: a branch gone with no result
    // ref is looked up there (rare: another pod took the run, or an operator deleted it).
    if (const auto run_id =
            tip == tips.end() && u.result ? parse_result_ref(*u.result) : std::nullopt)
      if (const auto folded = this->folded(tips, *run_id)) {
        results[i] = {RefOutcome::taken, "it is gone, and " + *folded};
        continue;
      }
    if (u.build) {
      // Anyone with push access may point the ref at anything: a tip the cache holds that is no
      // commit could be no parent, and would fail the whole push.
      if (tip != tips.end() && repo.contains(tip_hex) && !is_commit(git(), tip->second)) {
        results[i] = {RefOutcome::refused, "its tip " + tip_hex + " is no commit"};
        continue;
      }
      auto& sources = connection.sources;
      sources.use_own_objects();
      if (tip != tips.end() && !repo.contains(tip_hex)) sources.stub(tip->second);
      const git_oid built = parse_oid(u.build(tip_hex, sources));
      // Forced, since a fast-forward by construction: libgit2 would otherwise look for the
      // merge base of the built commit and the stub, through all that the commit reaches (an
      // archive fold reaches every folded run's checkpoints). The server still takes it only on
      // the tip it advertised.
      std::string refspec = "+";  // appended, not `"+" + …`: GCC 12 -O3 warns of a false overlap
      refspec += sources.add(u.ref, built) + ":" + u.ref;
      sends.push_back({.update = i, .refspec = std::move(refspec)});
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
