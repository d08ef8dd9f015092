// This instance's lease in the results repo (checkpoint/lease.hpp): taken by
// the first restore, renewed every period while serve runs (by the periodic
// checkpoint push, when there is one, and then only while the pod holds a
// run), given up at the end of a shutdown that pushed everything. A run whose branch tip this pod
// wrote stays this pod's while the lease lasts, so that no starting pod takes a run from the live
// pod running it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <optional>

#include "inflight/core/duration.hpp"
#include "inflight/supervisor/checkpoint_port.hpp"

namespace inflight {

struct LeaseTerms {
  Duration period;  // between renewals, and between looks at runs other pods hold
  Duration length;  // from a renewal to the lease's end
};

// Renewed every checkpoint interval (30 s without periodic checkpoints). A
// lease outlasts three missed renewals and a whole shutdown: a pod whose
// shutdown could not reach the results repo, restarting on its own disk,
// finds the runs only that disk knows the end of still its own.
LeaseTerms lease_terms(Duration checkpoint_interval, Duration grace_period);

class PodLease {
 public:
  PodLease(boost::asio::io_context& io, CheckpointPort& store, LeaseTerms terms,
           Duration network_timeout);

  // For the first restore, which takes the lease before it claims anything:
  // the end to ask for; taken() says whether that restore reached the store.
  SystemClock::time_point take();
  void taken(bool landed);
  // The end of the lease as last written, by this pod's clock; none before
  // it was taken and once it is given up. For /metrics only: no other pod
  // compares it with its own clock.
  std::optional<SystemClock::time_point> expiry() const { return expiry_; }
  // Renews the lease every period from now on (when no periodic checkpoint
  // push renews it).
  void keep();
  // For a push that renews the lease with other refs: the end to ask for,
  // none once stopped or while a renewal is under way; renewed() takes that
  // push's result.
  std::optional<SystemClock::time_point> renewal();
  void renewed(const CheckpointResult& result);
  // This pod holds no run: the lease is left to run out, and shows as none,
  // until a push that carries a run renews it (docs/checkpoints.md "Leases
  // and clocks"). held() is false from then on.
  void let_go();
  bool held() const { return expiry_.has_value() || renewing_; }
  // A look that carried no lease claimed runs: a lease let go is renewed at
  // once, on its own (their claim commits hold them until then).
  void claimed() {
    if (!held()) renew(/*then_keep=*/false);
  }
  // No more renewals: the lease runs out (shutdown).
  void stop();
  // For the last push of a shutdown, which releases the lease with the runs:
  // the end to take it again until should a run be refused (see
  // SaveAllRequest), none while a renewal is under way.
  std::optional<SystemClock::time_point> release() const;
  // Stops renewing and, once a renewal under way is over, deletes the lease.
  // `done` runs in any case, at the latest at the deadline.
  void give_up(SteadyClock::time_point deadline, std::function<void()> done);

 private:
  void renew(bool then_keep);
  SystemClock::time_point end_from_now() const;

  CheckpointPort& store_;
  LeaseTerms terms_;
  Duration network_timeout_;
  boost::asio::steady_timer timer_;
  bool stopped_ = false;
  bool renewing_ = false;
  SystemClock::time_point asked_;  // the end the write under way asks for
  std::optional<SystemClock::time_point> expiry_;
  std::optional<SystemClock::time_point> let_go_end_;  // the record's end when it was let go
  std::function<void()> after_renewal_;
};

}  // namespace inflight
