// The records that hold runs (other pods' leases, claims, handovers),
// watched by this pod's own monotonic clock (docs/checkpoints.md "Leases and clocks"), as
// Kubernetes leader election watches its lease: a record is over once this pod has seen it
// unchanged for its whole term. A record that changed is alive, whatever its timestamps say;
// another machine's wall clock decides nothing, and is only compared with ours to warn of skew.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "inflight/checkpoint/store_types.hpp"
#include "inflight/core/clock.hpp"
#include "inflight/core/duration.hpp"

namespace inflight {

// A look comes this long after a watched record's term ends, so that the
// record is over by then.
inline constexpr std::chrono::milliseconds kTermEndSlack{100};

class RecordWatch {
 public:
  // `period`: how often the records are looked at, to tell a skewed clock
  // from a record written a look ago.
  explicit RecordWatch(Duration period) : period_(period) {}

  // What one look at the store saw at `now`; a record it did not see is
  // forgotten (deleted, or no longer holding a run).
  void saw(const std::vector<checkpoint::WatchedRecord>& records, SteadyClock::time_point now);
  // The records seen unchanged for their whole term by `now`: ref -> oid.
  std::map<std::string, std::string> expired(SteadyClock::time_point now) const;
  // How long until the next record's term is over; nullopt when none is watched.
  std::optional<Duration> next_expiry(SteadyClock::time_point now) const;

 private:
  struct Watched {
    std::string oid;
    SteadyClock::time_point since;  // first seen as it is
    Duration term;
  };
  void warn_of_skew(const checkpoint::WatchedRecord& record) const;

  Duration period_;
  std::map<std::string, Watched> watched_;  // by ref
};

}  // namespace inflight
