// See pod_lease.hpp.
#include "inflight/supervisor/lifecycle/pod_lease.hpp"

#include <algorithm>

#include "inflight/core/log.hpp"

namespace inflight {

namespace {

constexpr Duration kPeriodWithoutCheckpoints{30000};
constexpr Duration kShortestPeriodCounted{1000};
constexpr int kMissedRenewals = 3;

}  // namespace

LeaseTerms lease_terms(Duration checkpoint_interval, Duration grace_period) {
  const auto period =
      checkpoint_interval > Duration::zero() ? checkpoint_interval : kPeriodWithoutCheckpoints;
  return {.period = period,
          .length = kMissedRenewals * std::max(period, kShortestPeriodCounted) + grace_period};
}

PodLease::PodLease(boost::asio::io_context& io, CheckpointPort& store, LeaseTerms terms,
                   Duration network_timeout)
    : store_(store), terms_(terms), network_timeout_(network_timeout), timer_(io) {}

SystemClock::time_point PodLease::end_from_now() const {
  return SystemClock::now() + std::chrono::duration_cast<SystemClock::duration>(terms_.length);
}

SystemClock::time_point PodLease::take() {
  asked_ = end_from_now();
  return asked_;
}

void PodLease::taken(bool landed) {
  if (landed) expiry_ = asked_;
}

void PodLease::keep() {
  if (stopped_) return;
  timer_.expires_after(terms_.period);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec && !stopped_) renew(/*then_keep=*/true);
  });
}

std::optional<SystemClock::time_point> PodLease::renewal() {
  if (stopped_ || renewing_) return std::nullopt;
  renewing_ = true;
  // Held again: until this renewal lands, /metrics shows the end the record still says, so that
  // a renewal that fails raises InflightLeaseAboutToLapse as it would have before the let-go.
  if (!expiry_) expiry_ = std::exchange(let_go_end_, std::nullopt);
  return take();
}

void PodLease::renewed(const CheckpointResult& result) {
  renewing_ = false;
  taken(static_cast<bool>(result));
  if (!result) log::warn("lease not renewed; will retry", {{"error", result.error().message}});
  if (!after_renewal_) return;
  timer_.cancel();
  std::exchange(after_renewal_, nullptr)();
}

void PodLease::renew(bool then_keep) {
  const auto until = renewal();
  if (!until) {  // a renewal under way (claimed()'s) does not keep renewing
    if (then_keep) keep();
    return;
  }
  store_.hold_lease(*until, SteadyClock::now() + network_timeout_,
                    [this, then_keep](const CheckpointResult& result) {
                      renewed(result);
                      if (then_keep) keep();
                    });
}

void PodLease::let_go() {
  if (!expiry_ || renewing_) return;
  let_go_end_ = std::exchange(expiry_, std::nullopt);
  log::info("lease left to run out: this pod holds no run", {});
}

void PodLease::stop() {
  stopped_ = true;
  timer_.cancel();
}

std::optional<SystemClock::time_point> PodLease::release() const {
  if (renewing_) return std::nullopt;
  return end_from_now();
}

void PodLease::give_up(SteadyClock::time_point deadline, std::function<void()> done) {
  stop();
  auto drop = [this, deadline, done] {
    store_.drop_lease(deadline, [this, done](const CheckpointResult& result) {
      if (result) {
        expiry_.reset();
        log::info("lease given up", {});
      } else {
        log::warn("lease not given up; it runs out on its own",
                  {{"error", result.error().message}});
      }
      done();
    });
  };
  if (!renewing_) return drop();
  // The renewal must not land after the deletion; it gets until the deadline.
  after_renewal_ = std::move(drop);
  timer_.expires_at(deadline);
  timer_.async_wait([this, done](const boost::system::error_code& ec) {
    if (ec || !after_renewal_) return;
    after_renewal_ = nullptr;
    log::warn("lease not given up: its renewal is still under way", {});
    done();
  });
}

}  // namespace inflight
