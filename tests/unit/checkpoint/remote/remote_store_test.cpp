#include <barrier>
#include <chrono>
#include <functional>
#include <iostream>
#include <sstream>
#include <thread>

#include "checkpoint/background_process.hpp"
#include "checkpoint/checkpoint_test_support.hpp"
#include "git/cache_repo_impl.hpp"
#include "git/cache_sweep.hpp"
#include "git/git_error.hpp"
#include "git/git_handle.hpp"
#include "git/markers.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"
#include "inflight/core/branch_name.hpp"
#include "remote/push_sources.hpp"
#include "remote/remote_store_impl.hpp"

namespace inflight::checkpoint::testing {
namespace {

const std::string kRef = "refs/heads/inflight/pod-a/r-1";

// `bytes` letters that do not compress, and a newline.
std::string noise(std::size_t bytes) {
  std::string text;
  for (std::uint32_t x = 1; text.size() < bytes;) {
    x = x * 1664525u + 1013904223u;
    text += static_cast<char>('a' + (x >> 24) % 26);
  }
  return text + "\n";
}

Failure kind_of(const std::function<void()>& call, std::string* message = nullptr) {
  try {
    call();
  } catch (const GitError& error) {
    if (message != nullptr) *message = error.what();
    return error.kind();
  }
  ADD_FAILURE() << "expected a GitError";
  return Failure::other;
}

class RemoteStoreTest : public CheckpointTest {
 protected:
  void SetUp() override {
    run("git init -q --bare '" + remote_path().string() + "'");
    repo_.emplace(cache_path());
    snapshotter_.emplace(*repo_, std::vector<std::string>{});
  }
  fs::path remote_path() const { return temp_.path() / "results.git"; }
  RemoteConfig config(const std::string& url) const {
    return RemoteConfig{url, "", "", {}, {}, {}};
  }

  std::string checkpoint(const std::string& content,
                         const std::optional<std::string>& parent = std::nullopt) {
    write_file(run_dir() / "index.jsonl", content);
    return *snapshotter_->snapshot(
        run_dir(), CheckpointInfo{"r-1", 1, CheckpointReason::manual, "pod-a", 1}, parent);
  }

  // Another agent on the local results repo, with a cache and a commit of
  // its own: step(store, its commit, i) for each of `steps` steps, each begun
  // together with the test's (`both`). Its failures are only load here.
  using Step = std::function<void(RemoteStore&, const std::string& theirs, int i)>;
  std::thread other_agent(std::barrier<>& both, int steps, Step step) {
    CacheRepo cache(temp_.path() / "other-cache.git");
    std::string theirs = *RunSnapshotter(cache, {}).snapshot(
        run_dir(), CheckpointInfo{"r-0", 1, CheckpointReason::manual, "pod-b", 1}, {});
    return std::thread([this, &both, steps, step = std::move(step), cache = std::move(cache),
                        theirs = std::move(theirs)]() mutable {
      RemoteStore store(cache, config(remote_path().string()));
      for (int i = 0; i < steps; ++i) {
        both.arrive_and_wait();
        try {
          step(store, theirs, i);
        } catch (const GitError&) {
        }
      }
    });
  }

  // `commits` commits on the server's archive, each with a file of its own, made there as other
  // pods' folds would be; its tip.
  std::string archive_on_server(int commits) {
    const bool exists = !git(remote_path(), "for-each-ref " + std::string(kArchiveRef)).empty();
    std::string stream;
    for (int i = 1; i <= commits; ++i) {
      const auto content = "result " + std::to_string(i) + "\n";
      stream += "commit " + std::string(kArchiveRef) + "\ncommitter t <t@t> " +
                std::to_string(1700000000 + i) + " +0000\ndata 5\nfold\n" +
                (i == 1 && exists ? "from " + std::string(kArchiveRef) + "^0\n" : "") +
                "M 644 inline f" + std::to_string(i) + "\ndata " + std::to_string(content.size()) +
                "\n" + content + "\n";
    }
    write_file(temp_.path() / "archive.stream", stream);
    git(remote_path(),
        "fast-import --quiet < '" + (temp_.path() / "archive.stream").string() + "'");
    return archive_tip();
  }
  std::string archive_tip() {
    return trimmed(git(remote_path(), "rev-parse " + std::string(kArchiveRef)));
  }
  // An update that folds run `run_id` into the archive, on whatever tip the server advertises: a
  // commit on it whose tree holds the run's publish marker.
  static RefUpdate fold(const std::string& run_id) {
    return {
        .ref = std::string(kArchiveRef),
        .commit = "",
        .from = std::nullopt,
        .build = [run_id](const std::string& tip, PushSources& objects) {
          const auto marker = write_marker(objects.git(), published_marker(run_id));
          git_treebuilder* raw = nullptr;
          git_check(git_treebuilder_new(&raw, objects.git(), nullptr), "start a fold");
          const TreeBuilderHandle builder(raw);
          git_check(git_treebuilder_insert(nullptr, builder.get(), run_id.c_str(), &marker,
                                           GIT_FILEMODE_TREE),
                    "add a marker");
          git_oid tree;
          git_check(git_treebuilder_write(&tree, builder.get()), "write a fold's tree");
          std::vector<std::string> parents;
          if (!tip.empty()) parents.push_back(tip);
          return oid_hex(write_commit_on(objects.git(), tree, parents, "fold " + run_id + "\n"));
        }};
  }
  // A commit no ref reaches, and a status marker no fold holds: stored on the server, unreachable.
  std::pair<std::string, std::string> stored_on_server() {
    std::string tree;
    for (const auto& marker : {published_marker("r-2"), status_marker("r-2", "failed")}) {
      write_file(temp_.path() / "stored", marker.bytes);
      tree = trimmed(git(remote_path(), "hash-object -w -t tree --stdin < '" +
                                            (temp_.path() / "stored").string() + "'"));
    }
    return {trimmed(git(remote_path(), "commit-tree -m stored " + tree)), tree};
  }
  // Every object the server stores, reachable or not: a stub sent would be counted.
  std::size_t server_objects() {
    std::size_t objects = 0;
    std::istringstream counts(git(remote_path(), "count-objects -v"));
    for (std::string line; std::getline(counts, line);)
      if (line.starts_with("count: ") || line.starts_with("in-pack: "))
        objects += std::stoul(line.substr(line.find(' ') + 1));
    return objects;
  }

  std::optional<CacheRepo> repo_;
  std::optional<RunSnapshotter> snapshotter_;
};

TEST_F(RemoteStoreTest, PushListFetchRemoveRoundTrip) {
  RemoteStore store(*repo_, config(remote_path().string()));
  const std::string first = checkpoint("1\n");
  store.push(kRef, first);
  const std::string second = checkpoint("1\n2\n", first);
  store.push(kRef, second);
  EXPECT_EQ(trimmed(git(remote_path(), "rev-parse " + kRef)), second);

  const auto branches = store.list();
  ASSERT_EQ(branches.size(), 1u);
  EXPECT_EQ(branches[0].ref, kRef);
  EXPECT_EQ(branches[0].oid, second);
  EXPECT_TRUE(store.list("refs/heads/other/").empty());

  CacheRepo elsewhere(temp_.path() / "other-cache.git");
  RemoteStore other(elsewhere, config(remote_path().string()));
  EXPECT_EQ(other.fetch(kRef), second);
  EXPECT_EQ(history(elsewhere, second).size(), 2u);
  EXPECT_EQ(read_file_at(elsewhere, second, "index.jsonl", 1 << 30), "1\n2\n");

  store.remove(kRef);
  EXPECT_TRUE(store.list().empty());
  EXPECT_EQ(kind_of([&] { other.fetch(kRef); }), Failure::not_found);
}

// A push's sources live in its memory: no ref is written in the cache before
// the push lands, so a cache that cannot take one does not stop it.
TEST_F(RemoteStoreTest, APushWritesNoRefInTheCacheBeforeItLands) {
  RemoteStore store(*repo_, config(remote_path().string()));
  const std::string commit = checkpoint("1\n");
  fs::remove_all(cache_path() / "refs" / "tags");
  write_file(cache_path() / "refs" / "tags", "not a directory\n");
  store.push(kRef, commit);
  EXPECT_EQ(store.update({{.ref = "refs/heads/inflight/pod-a/r-2", .commit = commit, .from = {}}})
                .front()
                .outcome,
            RefOutcome::updated);
  EXPECT_EQ(trimmed(git(remote_path(), "rev-parse " + kRef)), commit);
  EXPECT_EQ(trimmed(git(remote_path(), "rev-parse refs/heads/inflight/pod-a/r-2")), commit);
}

TEST_F(RemoteStoreTest, FileUrlsAreLocalToo) {
  RemoteStore store(*repo_, config("file://" + remote_path().string()));
  const std::string commit = checkpoint("x\n");
  store.push(kRef, commit);
  ASSERT_EQ(store.list().size(), 1u);
  EXPECT_EQ(store.fetch(kRef), commit);
}

// Layout 2's archive grows on a tip this cache never downloaded: a stub
// stands in for it, and only the new commit, its tree and its marker go.
TEST_F(RemoteStoreTest, ACommitBuiltOnTheServersTipIsPushedWithoutDownloadingIt) {
  const auto old_tip = archive_on_server(50);
  const auto before = server_objects();
  RemoteStore store(*repo_, config(remote_path().string()));
  const auto results = store.update({fold("r-7")});
  ASSERT_EQ(results[0].outcome, RefOutcome::updated) << results[0].detail;
  const auto tip = archive_tip();
  EXPECT_EQ(trimmed(git(remote_path(), "rev-parse " + tip + "^1")), old_tip);
  EXPECT_EQ(trimmed(git(remote_path(), "rev-parse " + tip + ":r-7")),
            oid_hex(marker_id(published_marker("r-7"))));
  EXPECT_EQ(trimmed(git(remote_path(), "rev-list --count " + tip)), "51");
  EXPECT_EQ(server_objects(), before + 3);  // the fold, its tree, the marker
  run("git -C '" + remote_path().string() + "' fsck --strict --no-dangling");
  // Neither the server's tip nor what the push built reached the cache.
  EXPECT_FALSE(repo_->contains(old_tip));
  EXPECT_FALSE(repo_->contains(tip));
  EXPECT_FALSE(repo_->pushed_tip(std::string(kLocalPrefix) + short_name(std::string(kArchiveRef)))
                   .has_value());
  // So the cache's next pushes, a fold and a checkpoint, go as before.
  ASSERT_EQ(store.update({fold("r-8")})[0].outcome, RefOutcome::updated);
  EXPECT_EQ(trimmed(git(remote_path(), "rev-parse " + archive_tip() + "^1")), tip);
  store.push(kRef, checkpoint("1\n"));
  // An archive that is not there yet starts with the first fold.
  git(remote_path(), "update-ref -d " + std::string(kArchiveRef));
  ASSERT_EQ(store.update({fold("r-9")})[0].outcome, RefOutcome::updated);
  EXPECT_EQ(trimmed(git(remote_path(), "rev-list --count " + archive_tip())), "1");
  // An update that names a commit and builds one is a bug of ours.
  auto both = fold("r-10");
  both.commit = tip;
  EXPECT_EQ(kind_of([&] { store.update({both}); }), Failure::other);
}

// A local results repo answers a lookup as a server that allows reachable
// wants does: a commit it only stores is not served, a tree it stores is.
TEST_F(RemoteStoreTest, ALocalResultsRepoAnswersALookupAsAServerDoes) {
  RemoteStore store(*repo_, config(remote_path().string()));
  ASSERT_EQ(store.update({fold("r-1")})[0].outcome, RefOutcome::updated);
  const auto folded = oid_hex(marker_id(published_marker("r-1")));
  const auto [stored, stored_tree] = stored_on_server();
  CacheRepo elsewhere(temp_.path() / "other-cache.git");
  RemoteStore other(elsewhere, config(remote_path().string()));
  EXPECT_EQ(other.reachable(folded, folded), RemoteStore::Reachable::yes);
  EXPECT_EQ(other.reachable(stored, folded), RemoteStore::Reachable::no);
  EXPECT_EQ(other.reachable(stored_tree, folded), RemoteStore::Reachable::yes);
  EXPECT_EQ(other.reachable(oid_hex(marker_id(published_marker("r-3"))), folded),
            RemoteStore::Reachable::no);
  // However large the repo, a lookup reads no more of it than the walk from its refs.
  store.push(kRef, checkpoint(noise(256 * 1024)));
  EXPECT_EQ(other.reachable(folded, folded), RemoteStore::Reachable::yes);
  EXPECT_FALSE(elsewhere.contains(trimmed(git(remote_path(), "rev-parse " + kRef))));
}

TEST_F(RemoteStoreTest, MissingLocalResultsRepoIsCreatedBare) {
  const fs::path path = temp_.path() / ".inflight" / "results.git";
  RemoteStore store(*repo_, config(path.string()));
  EXPECT_TRUE(store.list().empty());
  EXPECT_EQ(trimmed(git(path, "rev-parse --is-bare-repository")), "true");
  store.push(kRef, checkpoint("x\n"));
  EXPECT_EQ(store.list().size(), 1u);
}

TEST_F(RemoteStoreTest, FetchOfAMissingBranchIsNotFound) {
  RemoteStore store(*repo_, config(remote_path().string()));
  EXPECT_EQ(kind_of([&] { store.fetch("refs/heads/inflight/nobody/r-9"); }), Failure::not_found);
}

TEST_F(RemoteStoreTest, PushThatIsNotAFastForwardIsRejected) {
  RemoteStore store(*repo_, config(remote_path().string()));
  const std::string first = checkpoint("1\n");
  store.push(kRef, first);
  const std::string diverged = checkpoint("other\n");  // no parent: not a descendant
  EXPECT_EQ(kind_of([&] { store.push(kRef, diverged); }), Failure::rejected);
  EXPECT_EQ(trimmed(git(remote_path(), "rev-parse " + kRef)), first);
}

TEST_F(RemoteStoreTest, PushOverATipWeNeverSawIsRejected) {
  CacheRepo owner_cache(temp_.path() / "owner.git");
  RunSnapshotter owner(owner_cache, {});
  write_file(temp_.path() / "owner-run" / "a", "owner");
  const auto theirs =
      owner.snapshot(temp_.path() / "owner-run",
                     CheckpointInfo{"r-1", 2, CheckpointReason::claim, "pod-b", 0}, std::nullopt);
  RemoteStore(owner_cache, config(remote_path().string())).push(kRef, *theirs);

  RemoteStore store(*repo_, config(remote_path().string()));
  EXPECT_EQ(kind_of([&] { store.push(kRef, checkpoint("mine\n")); }), Failure::rejected);
  EXPECT_EQ(trimmed(git(remote_path(), "rev-parse " + kRef)), *theirs);
}

// libgit2 writes a local results repo's refs itself: a ref it could not
// write was judged by nobody, so the run is not another's.
TEST_F(RemoteStoreTest, ARefALocalResultsRepoCannotWriteIsUnwrittenNotRefused) {
  RemoteStore store(*repo_, config(remote_path().string()));
  const std::string commit = checkpoint("1\n");
  write_file(remote_path() / (kRef + ".lock"), "");  // left by a writer that died

  const auto results = store.update({{.ref = kRef, .commit = commit, .from = {}},
                                     {.ref = kRef + "-2", .commit = commit, .from = {}}});
  EXPECT_EQ(results[0].outcome, RefOutcome::unwritten) << results[0].detail;
  EXPECT_NE(results[0].detail.find("lock"), std::string::npos) << results[0].detail;
  EXPECT_EQ(results[1].outcome, RefOutcome::updated) << results[1].detail;
  std::string message;
  EXPECT_EQ(kind_of([&] { store.push(kRef, commit); }, &message), Failure::other);
  EXPECT_NE(message.find(kRef + ": could not write it"), std::string::npos) << message;
}

// The races CI found on a results repo at a local path: one agent deletes
// the last branch under a pod, and libgit2 removes the emptied directory
// while another agent writes a ref into it; or deletes a ref while another
// agent lists them. The two agents start each step together (a barrier), and
// the other deletes once per step, so it can fail one try of each update at
// most: tried again, each update lands, none is taken for another owner's.
TEST_F(RemoteStoreTest, AnUpdateRacingAnotherAgentOnALocalResultsRepoLands) {
  constexpr int kSteps = 200;
  const std::string commit = checkpoint("1\n");
  std::barrier both(2);
  std::thread remover =
      other_agent(both, kSteps, [](RemoteStore& store, const std::string& theirs, int) {
        const std::string other = "refs/heads/inflight/pod-b/r-0";
        store.update({{.ref = other, .commit = theirs, .from = {}}});
        store.update({{.ref = other, .commit = "", .from = {}}});
      });
  RemoteStore store(*repo_, config(remote_path().string()));
  for (int i = 0; i < kSteps; ++i) {
    const std::string ref = "refs/heads/inflight/pod-b/r-" + std::to_string(i + 1);
    both.arrive_and_wait();
    std::vector<RefResult> results;
    EXPECT_NO_THROW(results = store.update({{.ref = ref, .commit = commit, .from = {}}}));
    EXPECT_NO_THROW(results.push_back(store.update({{.ref = ref, .commit = "", .from = {}}})[0]));
    for (const auto& result : results)
      EXPECT_EQ(result.outcome, RefOutcome::updated) << ref << ": " << result.detail;
  }
  remover.join();
}

// Two agents write one new ref of a local results repo at once, ref after
// ref. The one whose write failed on the other's lock tries again on the tip
// the other wrote: that ref is taken from it alone (libgit2 would fail the
// whole push on a tip it cannot fast-forward), and the rest of its push lands.
TEST_F(RemoteStoreTest, ARefAnotherAgentWroteBetweenTriesIsTakenAloneOnALocalResultsRepo) {
  constexpr int kRefs = 200;
  auto contested = [](int i) { return "refs/heads/inflight/pod-b/r-" + std::to_string(i); };
  const std::string ours = checkpoint("1\n");
  std::barrier both(2);
  std::thread rival =
      other_agent(both, kRefs, [&](RemoteStore& store, const std::string& theirs, int i) {
        store.update({{.ref = contested(i), .commit = theirs, .from = {}}});
      });
  RemoteStore store(*repo_, config(remote_path().string()));
  int taken = 0;
  for (int i = 0; i < kRefs; ++i) {
    const std::string ref = "refs/heads/inflight/pod-a/r-" + std::to_string(i);
    both.arrive_and_wait();
    std::vector<RefResult> results;
    EXPECT_NO_THROW(results = store.update({{.ref = contested(i), .commit = ours, .from = {}},
                                            {.ref = ref, .commit = ours, .from = {}}}));
    if (results.size() != 2) continue;
    EXPECT_EQ(results[1].outcome, RefOutcome::updated) << ref << ": " << results[1].detail;
    EXPECT_NE(results[0].outcome, RefOutcome::refused) << results[0].detail;  // no server here
    taken += results[0].outcome == RefOutcome::taken;
  }
  rival.join();
  std::cout << taken << " of " << kRefs << " contested refs taken\n";
}

TEST_F(RemoteStoreTest, UnreachableServerIsUnreachable) {
  RemoteStore store(*repo_, config("git://127.0.0.1:" + std::to_string(free_port()) + "/x.git"));
  EXPECT_EQ(kind_of([&] { store.list(); }), Failure::unreachable);
}

TEST_F(RemoteStoreTest, MessagesNameTheUrlWithoutPasswordOrToken) {
  const std::string url_base = "127.0.0.1:" + std::to_string(free_port()) + "/x.git";
  RemoteConfig secret_config{"https://bob:s3cret@" + url_base, "bob", "tok-123", {}, {}, {}};
  RemoteStore store(*repo_, secret_config);
  EXPECT_EQ(store.display_url(), "https://bob@" + url_base);
  std::string message;
  EXPECT_EQ(kind_of([&] { store.list(); }, &message), Failure::unreachable);
  EXPECT_NE(message.find("https://bob@" + url_base), std::string::npos) << message;
  EXPECT_EQ(message.find("s3cret"), std::string::npos) << message;
  EXPECT_EQ(message.find("tok-123"), std::string::npos) << message;
}

// A real git server, so that server-side refusals (hooks, receive.* config) apply.
class GitDaemonTest : public RemoteStoreTest {
 protected:
  void SetUp() override {
    RemoteStoreTest::SetUp();
    daemon_.emplace(std::vector<std::string>{"git", "daemon", "--reuseaddr", "--listen=127.0.0.1",
                                             "--port=" + std::to_string(port_),
                                             "--base-path=" + temp_.path().string(), "--export-all",
                                             "--enable=receive-pack", temp_.path().string()},
                    port_);
  }
  std::string url() const { return "git://127.0.0.1:" + std::to_string(port_) + "/results.git"; }

  int port_ = free_port();
  std::optional<BackgroundProcess> daemon_;
};

TEST_F(GitDaemonTest, PushesAndListsOverTheNetwork) {
  RemoteStore store(*repo_, config(url()));
  const std::string commit = checkpoint("x\n");
  store.push(kRef, commit);
  ASSERT_EQ(store.list().size(), 1u);
  EXPECT_EQ(store.list()[0].oid, commit);
  store.remove(kRef);
  EXPECT_TRUE(store.list().empty());
}

// A publish's look at the layout downloads layout 1's index tip and nothing else: no lease, and
// no index at all where the repo keeps layout 2's log. (A local results repo sends all its refs
// reach whatever is asked: libgit2's local transport.)
TEST_F(GitDaemonTest, AListingForTheLayoutDownloadsOnlyLayoutOnesIndex) {
  RemoteStore store(*repo_, config(url()));
  store.push(std::string(kIndexRef), checkpoint("index\n"));
  store.push(lease_ref("pod-b"), checkpoint("lease\n"));
  const auto index = trimmed(git(remote_path(), "rev-parse " + std::string(kIndexRef)));
  const auto lease = trimmed(git(remote_path(), "rev-parse " + lease_ref("pod-b")));
  {
    CacheRepo fresh(temp_.path() / "fresh.git");
    RemoteStore(fresh, config(url())).list("refs/heads/inflight-", RemoteStore::Tips::flat_index);
    EXPECT_TRUE(fresh.contains(index));
    EXPECT_FALSE(fresh.contains(lease));
  }
  store.push(std::string(kRunsLogRef), checkpoint("log\n"));
  CacheRepo fresh(temp_.path() / "fresh-2.git");
  const auto listed =
      RemoteStore(fresh, config(url())).list("refs/heads/inflight-", RemoteStore::Tips::flat_index);
  EXPECT_EQ(listed.size(), 3u);
  EXPECT_FALSE(fresh.contains(index));
}

// A hook's refusal is the server's rule, not another owner (docs/faults.md
// "Faults and what they do").
TEST_F(GitDaemonTest, PreReceiveHookThatDeclinesIsRefusedNotLost) {
  write_file(remote_path() / "hooks" / "pre-receive", "#!/bin/sh\necho no >&2\nexit 1\n");
  fs::permissions(remote_path() / "hooks" / "pre-receive", fs::perms::owner_all);
  RemoteStore store(*repo_, config(url()));
  std::string message;
  EXPECT_EQ(kind_of([&] { store.push(kRef, checkpoint("x\n")); }, &message), Failure::refused);
  EXPECT_NE(message.find(kRef), std::string::npos) << message;
  EXPECT_NE(message.find("hook declined"), std::string::npos) << message;
  EXPECT_TRUE(store.list().empty());
}

// A server that could not take our ref's lock (another push held it, or
// held packed-refs while deleting) answers "failed to update ref", as it does
// for a lost race: the tips listed again show nobody moved the ref, so the
// run stays ours and its push is tried again. This was seen in CI: a pod's
// own run fenced while the other pod deleted its branches.
TEST_F(GitDaemonTest, AnUpdateTheServerCouldNotLockIsUnwrittenNotTaken) {
  RemoteStore store(*repo_, config(url()));
  const std::string first = checkpoint("1\n");
  store.push(kRef, first);
  const std::string second = checkpoint("2\n", first);
  const auto lock = remote_path() / (kRef + ".lock");
  write_file(lock, "");  // held by the other push

  const auto results = store.update({{.ref = kRef, .commit = second, .from = first},
                                     {.ref = kRef + "-2", .commit = second, .from = {}}});
  EXPECT_EQ(results[0].outcome, RefOutcome::unwritten) << results[0].detail;
  EXPECT_NE(results[0].detail.find("failed to update ref"), std::string::npos) << results[0].detail;
  EXPECT_EQ(results[1].outcome, RefOutcome::updated) << results[1].detail;
  EXPECT_EQ(trimmed(git(remote_path(), "rev-parse " + kRef)), first);

  fs::remove(lock);
  EXPECT_EQ(store.update({{.ref = kRef, .commit = second, .from = first}})[0].outcome,
            RefOutcome::updated);
  EXPECT_EQ(trimmed(git(remote_path(), "rev-parse " + kRef)), second);
}

TEST_F(GitDaemonTest, DeletionRefusedByTheServerIsRefused) {
  git(remote_path(), "config receive.denyDeletes true");
  RemoteStore store(*repo_, config(url()));
  store.push(kRef, checkpoint("x\n"));
  EXPECT_EQ(kind_of([&] { store.remove(kRef); }), Failure::refused);
  EXPECT_EQ(store.list().size(), 1u);
}

// A connection opened ahead carries the tips of its time: a ref made since
// is not overwritten, the server refuses the stale update: a lost race.
TEST_F(GitDaemonTest, AnUpdateOverAConnectionOpenedAheadIsJudgedByTheServer) {
  RemoteStore store(*repo_, config(url()));
  const std::string ours = checkpoint("ours\n");
  store.connect_ahead();
  CacheRepo elsewhere(temp_.path() / "other-cache.git");
  RunSnapshotter other_snapshotter(elsewhere, {});
  write_file(run_dir() / "index.jsonl", "theirs\n");
  const std::string theirs = *other_snapshotter.snapshot(
      run_dir(), CheckpointInfo{"r-1", 1, CheckpointReason::manual, "pod-b", 1}, {});
  RemoteStore(elsewhere, config(url())).push(kRef, theirs);

  const auto results = store.update({{.ref = kRef, .commit = ours, .from = {}},
                                     {.ref = kRef + "-2", .commit = ours, .from = {}}});
  EXPECT_EQ(results[0].outcome, RefOutcome::taken) << results[0].detail;
  EXPECT_EQ(results[1].outcome, RefOutcome::updated) << results[1].detail;
  EXPECT_EQ(trimmed(git(remote_path(), "rev-parse " + kRef)), theirs);
}

// Two pods fold at once: the one whose tip went stale is refused by the
// server, builds again on the tip it finds then, and neither fold is lost.
TEST_F(GitDaemonTest, AFoldOnATipThatMovedIsBuiltAgainOnTheNewOne) {
  archive_on_server(20);
  RemoteStore store(*repo_, config(url()));
  store.connect_ahead();                     // advertises the archive as it is now
  const auto theirs = archive_on_server(1);  // another pod's fold meanwhile
  const auto results = store.update({fold("r-7")});
  ASSERT_EQ(results[0].outcome, RefOutcome::updated) << results[0].detail;
  EXPECT_EQ(trimmed(git(remote_path(), "rev-parse " + archive_tip() + "^1")), theirs);
  EXPECT_EQ(trimmed(git(remote_path(), "rev-list --count " + archive_tip())), "22");
  run("git -C '" + remote_path().string() + "' fsck --strict --no-dangling");
  // With the tip it was judged on named, a moved archive is another's.
  auto judged = fold("r-9");
  judged.from = std::string(40, '1');
  EXPECT_EQ(store.update({judged})[0].outcome, RefOutcome::taken);
}

// Layout 2's lookup: a marker the archive holds is there, one never folded is
// not, and a server that allows no wants by id cannot say. git serves a tree
// it stores without a walk, and a commit only where a ref reaches it. Nothing
// of it lands in the cache.
TEST_F(GitDaemonTest, AMarkerIsLookedUpByIdWithoutDownloadingIntoTheCache) {
  RemoteStore store(*repo_, config(url()));
  ASSERT_EQ(store.update({fold("r-1")})[0].outcome, RefOutcome::updated);
  const auto folded = oid_hex(marker_id(published_marker("r-1")));
  const auto [stored, stored_tree] = stored_on_server();
  const auto never = oid_hex(marker_id(published_marker("r-3")));

  CacheRepo elsewhere(temp_.path() / "other-cache.git");
  RemoteStore other(elsewhere, config(url()));
  const auto reachable = [&](const std::string& commit) { return other.reachable(commit, folded); };
  EXPECT_EQ(reachable(folded), RemoteStore::Reachable::unknown);
  EXPECT_EQ(other.serves_markers(), RemoteStore::Reachable::unknown);
  git(remote_path(), "config uploadpack.allowReachableSHA1InWant true");
  // Whether it serves markers at all is one fetch, of the marker every fold holds.
  EXPECT_EQ(kind_of([&] { other.serves_markers(); }), Failure::unreachable);  // no fold holds K
  write_file(temp_.path() / "known", archive_known().bytes);
  git(remote_path(),
      "hash-object -w -t tree --stdin < '" + (temp_.path() / "known").string() + "'");
  EXPECT_EQ(other.serves_markers(), RemoteStore::Reachable::yes);
  EXPECT_EQ(reachable(folded), RemoteStore::Reachable::yes);
  EXPECT_EQ(reachable(stored), RemoteStore::Reachable::no);
  EXPECT_EQ(reachable(stored_tree), RemoteStore::Reachable::yes);
  EXPECT_EQ(reachable(never), RemoteStore::Reachable::no);
  // Refused, and then the known commit too: no answer, never a "no".
  EXPECT_EQ(kind_of([&] { other.reachable(never, stored); }), Failure::unreachable);
  EXPECT_FALSE(elsewhere.contains(folded));
  EXPECT_TRUE(fs::is_empty(temp_.path() / "other-cache.git" / kLookupDir));

  // A want that brings more than a marker is given up.
  store.push(kRef, checkpoint(noise(256 * 1024)));
  std::string message;
  EXPECT_EQ(kind_of([&] { reachable(trimmed(git(remote_path(), "rev-parse " + kRef))); }, &message),
            Failure::other);
  EXPECT_NE(message.find("65536 bytes"), std::string::npos) << message;
}

// A result whose ref layout 2 deleted is fetched by its id alone: where the server allows
// reachable wants, with what it reaches; a commit no ref reaches is no such commit.
TEST_F(GitDaemonTest, ACommitIsFetchedByItsIdWhereReachableWantsAreAllowed) {
  RemoteStore store(*repo_, config(url()));
  store.push(kRef, checkpoint(noise(1024)));
  const auto tip = trimmed(git(remote_path(), "rev-parse " + kRef));
  git(remote_path(), "update-ref refs/kept " + tip);
  git(remote_path(), "update-ref -d " + kRef);
  CacheRepo elsewhere(temp_.path() / "other-cache.git");
  RemoteStore other(elsewhere, config(url()));
  EXPECT_EQ(kind_of([&] { other.fetch_commit(tip); }), Failure::other);  // wants by id refused
  git(remote_path(), "config uploadpack.allowReachableSHA1InWant true");
  EXPECT_EQ(other.fetch_commit(tip), tip);
  EXPECT_EQ(read_file_at(elsewhere, tip, "index.jsonl", 1 << 20), noise(1024));
  git(remote_path(), "update-ref -d refs/kept");
  CacheRepo third(temp_.path() / "third-cache.git");
  kind_of([&] { RemoteStore(third, config(url())).fetch_commit(tip); });
}

TEST_F(RemoteStoreTest, AConnectionThatCouldNotBeOpenedAheadFailsTheUpdate) {
  RemoteStore store(*repo_, config("git://127.0.0.1:" + std::to_string(free_port()) + "/x.git"));
  store.connect_ahead();
  EXPECT_EQ(
      kind_of([&] { store.update({{.ref = kRef, .commit = checkpoint("1\n"), .from = {}}}); }),
      Failure::unreachable);
}

// An HTTP server that refuses every request with 401, to see auth give up fast.
TEST_F(RemoteStoreTest, RefusedCredentialsEndQuicklyAsAuth) {
  const int port = free_port();
  const std::string server =
      "import http.server\n"
      "class H(http.server.BaseHTTPRequestHandler):\n"
      "  def do_GET(self):\n"
      "    self.send_response(401)\n"
      "    self.send_header('WWW-Authenticate', 'Basic realm=\"x\"')\n"
      "    self.send_header('Content-Length', '0')\n"
      "    self.end_headers()\n"
      "  def log_message(self, *a): pass\n"
      "http.server.HTTPServer(('127.0.0.1', " +
      std::to_string(port) + "), H).serve_forever()\n";
  const BackgroundProcess http({"python3", "-c", server}, port);
  RemoteStore store(
      *repo_,
      RemoteConfig{
          "http://127.0.0.1:" + std::to_string(port) + "/r.git", "", "tok-123", {}, {}, {}});
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  EXPECT_EQ(kind_of([&] { store.list(); }, &message), Failure::auth);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(message.find("tok-123"), std::string::npos) << message;
  EXPECT_NE(message.find("authentication to http://127.0.0.1"), std::string::npos) << message;
}

}  // namespace
}  // namespace inflight::checkpoint::testing
