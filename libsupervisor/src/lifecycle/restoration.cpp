// See restoration.hpp.
#include "inflight/supervisor/lifecycle/restoration.hpp"

#include "inflight/core/log.hpp"
#include "inflight/supervisor/runs/local_runs.hpp"

namespace inflight {

Restoration::Restoration(boost::asio::io_context& io, RunSupervisor& supervisor,
                         CheckpointPort& store, ShutdownPlan& plan, PodLease& lease,
                         const ServeSettings& settings,
                         std::function<void(const std::string&)> on_refused)
    : supervisor_(supervisor),
      store_(store),
      plan_(plan),
      lease_(lease),
      settings_(settings),
      period_(lease_terms(settings.checkpoint_interval, settings.grace_period).period),
      on_refused_(std::move(on_refused)),
      timer_(io),
      watch_(period_) {}

// A later look skips the runs this instance holds: their tips are its own,
// and would otherwise look like runs to take.
void Restoration::look(bool first) {
  RestoreQuery query;
  for (const auto& run : supervisor_.runs()) query.skip.insert(run->id);
  for (auto& run : find_resumable_runs(supervisor_.settings().runs_dir))
    if (!query.skip.count(run.params.run_id)) query.local.push_back(std::move(run));
  if (first) {
    query.lease_until = lease_.take();
    for (const auto& run : find_finished_runs(supervisor_.settings().runs_dir))
      query.finished.push_back(run.params.run_id);
  }
  // A pod that runs something leaves handed-over runs to an idle one first:
  // in a rolling deploy, the new pod rather than an old one about to stop.
  query.leave_handovers = !first && supervisor_.live_children() > 0;
  query.expired = watch_.expired(SteadyClock::now());
  plan_.restore_started();
  store_.restore(query, SteadyClock::now() + settings_.store.git_timeout,
                 [this, first](RestoreResult result) { on_result(std::move(result), first); });
}

void Restoration::on_result(RestoreResult result, bool first) {
  if (result.failure && result.failure->kind == Failure::auth) {
    if (first) return on_refused_(result.failure->message);
    log::error("the results repo refused our credentials", {{"error", result.failure->message}});
  }
  if (result.failure && result.failure->kind == Failure::cache)
    supervisor_.disk_health().report_failure(result.failure->message);
  supervisor_.disk_health().report_restore(result);
  if (first) lease_.taken(!result.failure);
  supervisor_.count_lost_claims(result.claims_lost);
  supervisor_.count_libgit2_indexed(result.indexed_by_libgit2.size());
  if (result.published) {  // the store answered: what it holds back is watched
    supervisor_.know_published(std::move(*result.published), result.published_partial);
    watch_.saw(result.watched, SteadyClock::now());
  }
  for (auto& held : result.held) supervisor_.hold(std::move(held.params), held.branch, held.reason);
  const auto restored = adopt_restored(supervisor_, settings_.children, std::move(result.runs));
  plan_.restore_finished();
  if (first) {
    // After the first look, which published and deleted whatever final
    // branches these runs left behind: a run shown here is skipped by later
    // ones. Only a look that reached the store may let a dir go.
    for (auto& run : find_finished_runs(supervisor_.settings().runs_dir))
      supervisor_.show_finished(std::move(run.params), !result.failure);
    supervisor_.finish_restore();
    // Periodic checkpoint pushes renew the lease; without them, it renews itself.
    if (settings_.checkpoint_interval > Duration::zero())
      supervisor_.checkpoints().start_periodic_checkpoints(settings_.checkpoint_interval, &lease_);
    else
      lease_.keep();
    log::info("ready", {{"restored", restored}});
  } else if (restored > 0) {
    log::info("runs taken over from other instances", {{"restored", restored}});
    lease_.claimed();
  }
  look_again_later();
}

// At the next lease period, or just after the first watched record's term
// ends. A look that found nothing to wait for looks again too: a pod scaled
// down later hands its runs over, and someone must take them.
void Restoration::look_again_later() {
  auto delay = period_;
  if (const auto next = watch_.next_expiry(SteadyClock::now()))
    delay = std::min(delay, *next + kTermEndSlack);
  timer_.expires_after(delay);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec && supervisor_.phase() != Phase::shutting_down) look(false);
  });
}

}  // namespace inflight
