// A live pod's runs stay its own. Each serve holds one lease in the results
// repo: a commit on `refs/heads/inflight-lease/<pod>` whose
// `Inflight-Lease-Until:` trailer says until when (seconds since the epoch)
// the pod answers for the runs whose branch tips it wrote. The pod renews it
// while it runs and deletes it once a shutdown pushed everything; a restore
// leaves another pod's runs alone while that pod's lease lasts.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "inflight/checkpoint/git_store.hpp"
#include "inflight/checkpoint/store_types.hpp"

namespace inflight::checkpoint {

// Creates or renews the lease, fast-forward on the tip it has now.
void hold_lease(CacheRepo& cache, RemoteStore& remote, const Lease& lease);
// The update that renews the lease on the tip this cache pushed last, for a
// push that carries other refs too. When the update finds that tip taken (a
// restart on a fresh disk), hold_lease() renews it on the remote's tip.
RefUpdate lease_update(CacheRepo& cache, RemoteStore& remote, const Lease& lease);
// Deletes the lease; one already gone is fine.
void drop_lease(RemoteStore& remote, const std::string& pod);

// The leases one listing of the results repo showed, each read when first
// asked about. A lease holds its pod's runs until the caller has watched it
// unchanged for its term (RestoreRequest::expired), whatever its
// `until` says; a one-shot command that watches nothing counts every lease
// live unless it takes over. A lease that cannot be read counts as none, so
// that no hostile ref keeps a pod's runs from being taken over.
class LeaseBook {
 public:
  LeaseBook(CacheRepo& cache, RemoteStore& remote, const std::vector<RemoteBranch>& listing,
            const RestoreRequest& request, std::vector<std::string>& problems);
  // Whether `pod` holds its runs now; a live lease is watched.
  bool live(const std::string& pod);
  // The end its lease names, for display only; 0 when none.
  std::int64_t until(const std::string& pod);
  // Every other pod's lease that is over or no lease, to delete: whoever may
  // take over its runs also cleans up after it.
  std::vector<RemoteBranch> ended(const std::string& own_pod);
  // Every other pod's lease: to watch for the next look.
  std::vector<WatchedRecord> watched();

 private:
  struct Read {
    std::optional<Lease> lease;
    std::int64_t written = 0;
    bool moved = false;  // listed, then gone: counted live for this look
  };
  const Read& read(const std::string& pod);

  CacheRepo& cache_;
  RemoteStore& remote_;
  const RestoreRequest& request_;
  std::vector<std::string>& problems_;
  std::map<std::string, RemoteBranch> listed_;  // by pod
  std::map<std::string, Read> read_;            // by pod, once read
};

}  // namespace inflight::checkpoint
