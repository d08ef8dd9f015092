#include "inflight/checkpoint/lease.hpp"

#include <charconv>
#include <chrono>
#include <sstream>

#include "git/cache_repo_impl.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"
#include "inflight/core/branch_name.hpp"

namespace inflight::checkpoint {

namespace {

std::string lease_commit(CacheRepo& cache, const Lease& lease,
                         const std::optional<std::string>& parent) {
  git_repository* git = raw_repo(cache);
  const CommitHandle parent_commit = parent ? lookup_commit(git, *parent) : CommitHandle();
  return oid_hex(
      write_commit(cache, empty_tree(git), parent_commit.get(), write_lease_message(lease)));
}

std::optional<std::string> remote_tip(RemoteStore& remote, const std::string& ref) {
  try {
    return remote.fetch(ref);
  } catch (const GitError& e) {
    if (e.kind() == Failure::not_found) return std::nullopt;
    throw;
  }
}

}  // namespace

// The parent is the lease this cache pushed last; when another process of
// the same pod name moved it since (a restart on a fresh disk), its tip.
RefUpdate lease_update(CacheRepo& cache, RemoteStore& remote, const Lease& lease) {
  const auto ref = lease_ref(lease.pod);
  return {.ref = ref, .commit = lease_commit(cache, lease, remote.last_pushed(ref)), .from = {}};
}

void hold_lease(CacheRepo& cache, RemoteStore& remote, const Lease& lease) {
  try {
    const auto update = lease_update(cache, remote, lease);
    return remote.push(update.ref, update.commit);
  } catch (const GitError& e) {
    if (e.kind() != Failure::rejected) throw;
  }
  const auto ref = lease_ref(lease.pod);
  remote.push(ref, lease_commit(cache, lease, remote_tip(remote, ref)));
}

void drop_lease(RemoteStore& remote, const std::string& pod) {
  try {
    remote.remove(lease_ref(pod));
  } catch (const GitError& e) {
    if (e.kind() != Failure::not_found) throw;
  }
}

LeaseBook::LeaseBook(CacheRepo& cache, RemoteStore& remote,
                     const std::vector<RemoteBranch>& listing, std::int64_t now,
                     std::vector<std::string>& problems)
    : cache_(cache), remote_(remote), now_(now), problems_(problems) {
  for (const auto& ref : listing)
    if (const auto pod = parse_lease_ref(ref.ref)) listed_.emplace(*pod, ref);
}

std::optional<std::int64_t> LeaseBook::until(const std::string& pod) {
  if (const auto it = read_.find(pod); it != read_.end()) return it->second;
  auto& until = read_[pod];
  const auto it = listed_.find(pod);
  if (it == listed_.end()) return until;
  try {
    const auto lease =
        parse_lease_message(commit_summary(cache_, remote_.fetch_listed(it->second)).message, now_);
    if (lease && lease->pod == pod)
      until = lease->until;
    else
      problems_.push_back(it->second.ref + ": not a lease; ignored");
  } catch (const GitError& e) {
    if (e.network()) throw;
    problems_.push_back(it->second.ref + ": " + e.what());
    // Listed, then not found: it moved under us (seen in a rollout test, a
    // live pod's runs were taken). Counted live for this look; the next one
    // reads it again.
    if (e.kind() == Failure::not_found) until = now_ + 1;
  }
  return until;
}

std::vector<RemoteBranch> LeaseBook::ended(const std::string& own_pod) {
  std::vector<RemoteBranch> refs;
  for (const auto& [pod, ref] : listed_) {
    const auto lease_until = until(pod);
    if (pod != own_pod && (!lease_until || *lease_until <= now_)) refs.push_back(ref);
  }
  return refs;
}

}  // namespace inflight::checkpoint
