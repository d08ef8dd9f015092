// See record_watch.hpp.
#include "inflight/supervisor/lifecycle/record_watch.hpp"

#include <algorithm>
#include <chrono>

#include "inflight/core/log.hpp"

namespace inflight {

namespace {

// Clocks in sync differ by less than this; a record is written at most a look
// (and a push) before it is seen changed.
constexpr auto kSkewTolerance = std::chrono::seconds(2);

}  // namespace

void RecordWatch::saw(const std::vector<checkpoint::WatchedRecord>& records,
                      SteadyClock::time_point now) {
  std::map<std::string, Watched> seen;
  for (const auto& record : records) {
    const auto known = watched_.find(record.ref);
    const bool unchanged = known != watched_.end() && known->second.oid == record.oid;
    if (known != watched_.end() && !unchanged) warn_of_skew(record);
    seen[record.ref] = {.oid = record.oid,
                        .since = unchanged ? known->second.since : now,
                        .term = std::chrono::seconds(std::max<std::int64_t>(record.term, 0))};
  }
  watched_ = std::move(seen);
}

std::map<std::string, std::string> RecordWatch::expired(SteadyClock::time_point now) const {
  std::map<std::string, std::string> over;
  for (const auto& [ref, watched] : watched_)
    if (now - watched.since >= watched.term) over.emplace(ref, watched.oid);
  return over;
}

std::optional<Duration> RecordWatch::next_expiry(SteadyClock::time_point now) const {
  std::optional<Duration> next;
  for (const auto& [ref, watched] : watched_) {
    const auto left = std::max<Duration>(
        std::chrono::duration_cast<Duration>(watched.since + watched.term - now), Duration::zero());
    next = next ? std::min(*next, left) : left;
  }
  return next;
}

// A record seen changed was written since the last look: its time, by its
// writer's clock, lies within a look (and a push) before now by ours.
void RecordWatch::warn_of_skew(const checkpoint::WatchedRecord& record) const {
  const auto written = SystemClock::from_time_t(static_cast<std::time_t>(record.written));
  const auto now = SystemClock::now();
  const auto ahead = std::chrono::duration_cast<std::chrono::seconds>(written - now);
  const auto behind = std::chrono::duration_cast<std::chrono::seconds>(now - written);
  if (ahead <= kSkewTolerance && behind <= period_ + kSkewTolerance) return;
  log::warn("another pod's clock looks skewed from this one's; ownership does not depend on it",
            {{"pod", record.pod},
             {"ref", record.ref},
             {"seconds", ahead > kSkewTolerance ? ahead.count() : -behind.count()}});
}

}  // namespace inflight
