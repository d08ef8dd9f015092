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

constexpr std::string_view kUntilTrailer = "Inflight-Lease-Until: ";
// No instance asks for this much; a lease that does was not written by one.
constexpr std::int64_t kLongestLease = 24 * 3600;

std::string lease_commit(CacheRepo& cache, const Lease& lease,
                         const std::optional<std::string>& parent) {
  git_repository* git = raw_repo(cache);
  const CommitHandle parent_commit = parent ? lookup_commit(git, *parent) : CommitHandle();
  return oid_hex(write_commit(cache, empty_tree(git), parent_commit.get(), lease_message(lease)));
}

std::optional<std::string> remote_tip(RemoteStore& remote, const std::string& ref) {
  try {
    return remote.fetch(ref);
  } catch (const GitError& e) {
    if (e.kind() == GitErrorKind::not_found) return std::nullopt;
    throw;
  }
}

}  // namespace

std::string lease_message(const Lease& lease) {
  return "inflight lease " + lease.pod + "\n\nInflight-Pod: " + lease.pod + "\n" +
         std::string(kUntilTrailer) + std::to_string(lease.until) + "\n";
}

std::optional<Lease> parse_lease_message(const std::string& message, std::int64_t now) {
  std::istringstream lines(message);
  std::string line;
  Lease lease;
  bool has_until = false;
  while (std::getline(lines, line)) {
    if (line.starts_with("Inflight-Pod: ")) lease.pod = line.substr(14);
    if (!line.starts_with(kUntilTrailer)) continue;
    const char* first = line.data() + kUntilTrailer.size();
    const char* last = line.data() + line.size();
    const auto [end, ec] = std::from_chars(first, last, lease.until);
    has_until = ec == std::errc() && end == last;
  }
  if (!has_until || lease.pod.empty() || lease.until > now + kLongestLease) return std::nullopt;
  return lease;
}

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
    if (e.kind() != GitErrorKind::rejected) throw;
  }
  const auto ref = lease_ref(lease.pod);
  remote.push(ref, lease_commit(cache, lease, remote_tip(remote, ref)));
}

void drop_lease(RemoteStore& remote, const std::string& pod) {
  try {
    remote.remove(lease_ref(pod));
  } catch (const GitError& e) {
    if (e.kind() != GitErrorKind::not_found) throw;
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
    if (e.kind() == GitErrorKind::not_found) until = now_ + 1;
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
