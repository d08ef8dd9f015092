#include "inflight/checkpoint/lease.hpp"

#include <algorithm>
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
                     const std::vector<RemoteBranch>& listing, const RestoreRequest& request,
                     std::vector<std::string>& problems)
    : cache_(cache), remote_(remote), request_(request), problems_(problems) {
  for (const auto& ref : listing)
    if (const auto pod = parse_lease_ref(ref.ref)) listed_.emplace(*pod, ref);
}

const LeaseBook::Read& LeaseBook::read(const std::string& pod) {
  if (const auto it = read_.find(pod); it != read_.end()) return it->second;
  auto& read = read_[pod];
  const auto it = listed_.find(pod);
  if (it == listed_.end()) return read;
  try {
    const auto commit = commit_summary(cache_, remote_.fetch_listed(it->second));
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    read.lease = parse_lease_message(commit.message, now);
    read.written = commit.time;
    if (!read.lease || read.lease->pod != pod) {
      read.lease.reset();
      problems_.push_back(it->second.ref + ": not a lease; ignored");
    }
  } catch (const GitError& e) {
    if (e.network()) throw;
    problems_.push_back(it->second.ref + ": " + e.what());
    // Listed, then not found: it moved under us (seen in a rollout test, a
    // live pod's runs were taken). Counted live for this look; the next one
    // reads it again.
    read.moved = e.kind() == Failure::not_found;
  }
  return read;
}

bool LeaseBook::live(const std::string& pod) {
  if (request_.take_over) return false;
  const auto& lease = read(pod);
  if (lease.moved) return true;
  if (!lease.lease) return false;
  const auto& listed = listed_.at(pod);
  const auto expired = request_.expired.find(listed.ref);
  return expired == request_.expired.end() || expired->second != listed.oid;
}

std::int64_t LeaseBook::until(const std::string& pod) {
  const auto& lease = read(pod);
  return lease.lease ? lease.lease->until : 0;
}

std::vector<RemoteBranch> LeaseBook::ended(const std::string& own_pod) {
  std::vector<RemoteBranch> refs;
  for (const auto& [pod, ref] : listed_) {
    if (pod == own_pod || read(pod).moved) continue;
    const auto expired = request_.expired.find(ref.ref);
    if (!read(pod).lease || (expired != request_.expired.end() && expired->second == ref.oid))
      refs.push_back(ref);
  }
  return refs;
}

// A lease's term is its own: the end it names less the time it was written,
// both by the writer's clock, so a skewed clock changes neither.
std::vector<WatchedRecord> LeaseBook::watched() {
  std::vector<WatchedRecord> records;
  for (const auto& [pod, listed] : listed_) {
    if (pod == request_.pod) continue;
    const auto& lease = read(pod);
    if (!lease.lease) continue;
    records.push_back(
        {.ref = listed.ref,
         .oid = listed.oid,
         .term = std::clamp<std::int64_t>(lease.lease->until - lease.written, 0, kLongestLease),
         .written = lease.written,
         .pod = pod});
  }
  return records;
}

}  // namespace inflight::checkpoint
