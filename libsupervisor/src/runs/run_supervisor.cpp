// See run_supervisor.hpp. This file: submits, runs restored or shown,
// the queue, and the shutdown's first step; attempt_end.cpp: what follows an
// attempt.
#include "inflight/supervisor/runs/run_supervisor.hpp"

#include <csignal>
#include <system_error>

#include "inflight/core/bounded_json.hpp"
#include "inflight/core/branch_name.hpp"
#include "inflight/core/log.hpp"
#include "inflight/supervisor/process/child_process.hpp"

namespace inflight {

namespace fs = std::filesystem;

RunSupervisor::RunSupervisor(boost::asio::io_context& io, ChildReaper& reaper,
                             CheckpointPort& checkpoints, SupervisorSettings settings,
                             const ChildTemplates& templates)
    : io_(io),
      settings_(std::move(settings)),
      templates_(templates),
      published_(checkpoints),
      disk_health_(io, checkpoints, settings_.disk_recheck, settings_.network_timeout),
      attempts_(io, reaper,
                {.pod_name = settings_.pod_name,
                 .stop_grace = settings_.stop_grace,
                 .echo_output = settings_.echo_output,
                 .containment = settings_.containment,
                 .hidden_files = settings_.hidden_files,
                 .models = settings_.models},
                [this](Run& run, Outcome outcome) { on_attempt_end(run, outcome); }),
      scheduler_(io, checkpoints,
                 {.network_timeout = settings_.network_timeout,
                  .publish = settings_.publish,
                  .release_at_ticks = settings_.release_at_ticks},
                 disk_health_, runs_,
                 {.fenced = [this](Run& run) { on_fenced(run); },
                  .before_tick = [this] { remove_expired_runs(); }}) {}

Run* RunSupervisor::find(const std::string& id) {
  for (auto& run : runs_)
    if (run->id == id) return run.get();
  return nullptr;
}

Run& RunSupervisor::add_run(std::string id, checkpoint::RunParams params, RunState initial) {
  auto dir = settings_.runs_dir / id;
  runs_.push_back(
      std::make_unique<Run>(std::move(id), std::move(dir), std::move(params), io_, initial));
  return *runs_.back();
}

// Every attempt runs the configured template of the run's name, with its
// request validated again exactly as a new submit would be; a run that fails
// that is held, and nothing of it is touched.
bool RunSupervisor::bind_template(Run& run) {
  const auto verdict = templates_.judge(run.params);
  if (verdict.refusal) {
    mark_held(run, *verdict.refusal);
    return false;
  }
  run.child = templates_.find(run.params.child_name);
  if (!run.params.child_digest.empty() && run.params.child_digest != run.child->digest())
    log::warn("the run's child template changed since it started; the configured one is used",
              {{"run_id", run.id},
               {"child", run.params.child_name},
               {"old_digest", run.params.child_digest},
               {"new_digest", run.child->digest()}});
  run.params.child_digest = run.child->digest();
  run.params.child = run.child->source();
  return true;
}

namespace {

SubmitResult refused(int status, std::string code, std::string message) {
  return {status, nullptr, std::move(code), std::move(message)};
}

// Takes the submit's own field `field` (`id`, `child`) out of the request,
// leaving the template's params; a refusal when it is not a valid string.
std::optional<SubmitResult> take_name(OrderedJson& request, const char* field,
                                      bool (*valid)(std::string_view), const std::string& rule,
                                      std::optional<std::string>& name) {
  if (!request.contains(field)) return std::nullopt;
  const auto& value = request[field];
  if (!value.is_string() || !valid(value.get_ref<const std::string&>()))
    return refused(400, "invalid_param", std::string(field) + ": " + rule);
  name = value.get<std::string>();
  request.erase(field);
  return std::nullopt;
}

bool any_name(std::string_view) {
  return true;
}
bool run_id_name(std::string_view id) {
  return checkpoint::is_valid_run_id(std::string(id));
}

}  // namespace

SubmitResult RunSupervisor::submit(const OrderedJson& body, bool looked_up) {
  if (!body.is_object())
    return refused(400, "invalid_request", "the request body must be a JSON object");
  OrderedJson request = body;
  std::optional<std::string> id, child_name;
  const auto id_rule = "must match " + std::string(checkpoint::kRunIdPattern);
  if (auto refusal = take_name(request, "id", run_id_name, id_rule, id)) return *refusal;
  if (Run* existing = id ? find(*id) : nullptr) return {200, existing, "", ""};
  // A run id the store must be asked about is asked only for a request this pod would run now,
  // unless the run is published for sure (its status unknown): it never runs, whatever the body.
  const bool ask = id && !looked_up && published_.must_look_up(*id);
  if (ask && published_.contains(*id))
    return {.http_status = 0, .run = nullptr, .error_code = "", .message = "", .look_up = *id};
  if (auto published = id && !ask ? published_answer(*id) : std::nullopt) return *published;
  if (auto refusal =
          take_name(request, "child", any_name, "must be the name of a child template", child_name))
    return *refusal;
  if (auto refusal = admission_refusal()) return *refusal;
  const auto wanted = child_name.value_or(std::string(checkpoint::kDefaultTemplate));
  const ChildTemplate* child = templates_.find(wanted);
  if (!child)
    return refused(400, "invalid_param",
                   "child: no template named '" + printable(wanted) +
                       "' (configured: " + templates_.names() + ")");
  if (auto problem = child->validate(request))
    return refused(400, "invalid_param", problem->param + ": " + problem->message);
  if (ask)
    return {.http_status = 0, .run = nullptr, .error_code = "", .message = "", .look_up = *id};
  return accept(id.value_or(checkpoint::generate_run_id()), std::move(request), *child);
}

// A run another pod (or an earlier life of this one) published: shown from
// its index entry with its final status from now on, never started.
std::optional<SubmitResult> RunSupervisor::published_answer(const std::string& id) {
  if (!published_.contains(id)) return std::nullopt;
  if (!published_.entry(id))
    return refused(409, "run_published",
                   "run " + id + " is finished and published at " + checkpoint::result_ref(id) +
                       " (the index has no entry of it); it does not run again");
  const auto& entry = *published_.entry(id);
  checkpoint::RunParams params;
  params.run_id = id;
  params.origin_pod = entry.pod;
  params.created_at = entry.created_at;
  params.final_status = entry.final_status;
  for (const auto& a : entry.attempts)
    params.attempts.push_back({.attempt = static_cast<int>(params.attempts.size()) + 1,
                               .pod = a.pod,
                               .started_at = a.started,
                               .ended_at = a.ended,
                               .outcome = a.outcome});
  Run& run = add_run(id, std::move(params), final_state_named(entry.final_status));
  run.finished_at = entry.finished_at;
  log::info("submit of a published run: nothing started", {{"run_id", id}});
  return SubmitResult{200, &run, "", ""};
}

void RunSupervisor::know_published(std::vector<checkpoint::PublishedRun> runs, bool partial) {
  published_.know(std::move(runs), partial);
}

void RunSupervisor::look_up(const std::string& id, std::function<void(std::optional<Error>)> done) {
  published_.look_up(id, SteadyClock::now() + settings_.network_timeout, std::move(done));
}

// Whether this instance can take one more run now: its disk can hold a
// checkpoint and the queue has room.
std::optional<SubmitResult> RunSupervisor::admission_refusal() const {
  if (const auto& problem = disk_health_.problem())
    return refused(503, "cannot_checkpoint",
                   "this instance's disk cannot hold a checkpoint (" + *problem + "); retry later");
  if (static_cast<int>(queue_.size()) >= settings_.max_queued)
    return refused(
        503, "queue_full",
        std::to_string(queue_.size()) + " runs are queued already (--max-queued); retry later");
  return std::nullopt;
}

// A validated request becomes a run: its own run dir with run-params.json,
// then the queue.
SubmitResult RunSupervisor::accept(const std::string& id, OrderedJson request,
                                   const ChildTemplate& child) {
  const auto dir = settings_.runs_dir / id;
  auto params = first_params(id, std::move(request), child, dir);
  if (const auto size = checkpoint::run_params_text(params).size();
      size > checkpoint::kMaxNewRunParamsBytes)
    return refused(413, "run_params_too_large",
                   "this run's run-params.json (its request and rendered template) would be " +
                       std::to_string(size) + " bytes; a new run's may be at most " +
                       std::to_string(checkpoint::kMaxNewRunParamsBytes) +
                       ", half of the 1 MiB a restore reads, the rest kept for its attempts");
  std::error_code ec;
  fs::create_directories(settings_.runs_dir, ec);
  if (!fs::create_directory(dir, ec)) {
    if (ec) return refused(500, "internal", "cannot create " + dir.string() + ": " + ec.message());
    return refused(409, "run_exists",
                   "run dir " + dir.string() + " already exists and belongs to no active run");
  }
  try {
    checkpoint::write_run_params(dir, params);
  } catch (const std::exception& e) {
    fs::remove_all(dir, ec);  // nothing started: a retry finds the id free
    log::error("run not accepted: its run dir cannot be written",
               {{"run_id", id}, {"error", e.what()}});
    return refused(500, "write_failed", std::string("cannot write run-params.json: ") + e.what());
  }
  Run& run = add_run(id, std::move(params));
  run.child = &child;
  run.checkpoint.branch = checkpoint::branch_name({settings_.pod_name, id});
  queue_.push_back(&run);
  log::info("run queued", {{"run_id", id}});
  start_queued();
  return {202, &run, "", ""};
}

checkpoint::RunParams RunSupervisor::first_params(const std::string& id, OrderedJson request,
                                                  const ChildTemplate& child,
                                                  const fs::path& dir) const {
  checkpoint::RunParams params;
  params.run_id = id;
  // What the first attempt will run, shown while the run is queued.
  params.argv = child.render(request, {id, fs::absolute(dir).string(), 1, false});
  params.request = std::move(request);
  params.child_name = child.name();
  params.child_digest = child.digest();
  params.child = child.source();
  params.origin_pod = settings_.pod_name;
  params.created_at = iso8601_utc(SystemClock::now());
  params.cwd = fs::absolute(child.cwd()).lexically_normal().string();
  return params;
}

void RunSupervisor::stop(Run& run) {
  const auto state = run.lifecycle.state();
  if (state == RunState::queued || state == RunState::deferred) {
    std::erase(queue_, &run);
    run.retry_timer.cancel();
    run.on(RunEvent::stop);
    finish(run);
    run.write_params();
    scheduler_.release_checkpoint(run);  // a restored run has a branch
    return;
  }
  if (!run.process || run.lifecycle.stop_cause() != StopCause::none) return;
  if (settings_.models) settings_.models->cut(run.id);  // SPEC §13: a stop cuts its calls
  attempts_.stop(run, RunEvent::stop);
  log::info("run stopping", {{"run_id", run.id}});
}

void RunSupervisor::adopt(checkpoint::RunParams params, fs::path dir, std::string branch,
                          const std::string& claim) {
  std::string id = params.run_id;
  Run& run = add_run(std::move(id), std::move(params));
  run.dir = std::move(dir);
  run.checkpoint.branch =
      branch.empty() ? checkpoint::branch_name({run.params.origin_pod, run.id}) : std::move(branch);
  if (!claim.empty()) {
    run.checkpoint.last_commit = claim;
    run.checkpoint.last_at = iso8601_utc(SystemClock::now());
  }
  if (!bind_template(run)) return;
  // What the claimed tip holds is saved already (docs/metrics.md "Metrics").
  if (!claim.empty()) run.checkpoint.records_saved = run.record_count();
  if (const auto budget = exhausted_budget(run)) {
    fail_out_of_budget(run, *budget);
    run.write_params();
    if (settings_.publish) scheduler_.release_checkpoint(run);
    return;
  }
  ++run_events_.restored;
  log::info("run restored", {{"run_id", run.id}, {"attempts", run.attempts()}});
  // Restored after a shutdown signal: claimed, so pushed back before exit.
  if (phase_ == Phase::shutting_down) {
    run.on(RunEvent::shut_down);
    return;
  }
  queue_.push_back(&run);
  start_queued();  // taken over from another instance while serving
}

void RunSupervisor::hold(checkpoint::RunParams params, std::string branch,
                         const std::string& reason) {
  if (find(params.run_id)) return;
  std::string id = params.run_id;
  Run& run = add_run(std::move(id), std::move(params));
  run.checkpoint.branch = std::move(branch);
  mark_held(run, reason);
}

namespace {

// When the run ended for good, as its last attempt recorded it.
std::optional<SystemClock::time_point> finished_time(const checkpoint::RunParams& params) {
  if (params.attempts.empty() || !params.attempts.back().ended_at) return std::nullopt;
  return parse_iso8601_utc(*params.attempts.back().ended_at);
}

bool expired(const std::optional<SystemClock::time_point>& finished, Duration keep) {
  return !finished || SystemClock::now() - *finished >= keep;
}

void remove_finished_dir(const std::string& run_id, const fs::path& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  log::info("finished run dir removed: --keep-finished is over",
            {{"run_id", run_id}, {"error", ec ? ec.message() : ""}});
}

}  // namespace

void RunSupervisor::show_finished(checkpoint::RunParams params, bool store_answered) {
  if (find(params.run_id)) return;
  if (store_answered && expired(finished_time(params), settings_.keep_finished))
    return remove_finished_dir(params.run_id, settings_.runs_dir / params.run_id);
  std::string id = params.run_id;
  const auto state = final_state_named(*params.final_status);
  Run& run = add_run(std::move(id), std::move(params), state);
  run.finished_at =
      run.params.attempts.empty() ? std::nullopt : run.params.attempts.back().ended_at;
  run.exit_code = run.params.attempts.empty() ? std::nullopt : run.params.attempts.back().exit_code;
  run.child = templates_.find(run.params.child_name);  // its progress file, when still configured
  run.checkpoint.branch = checkpoint::branch_name({run.params.origin_pod, run.id});
}

void RunSupervisor::remove_expired_runs() {
  std::erase_if(runs_, [this](const std::unique_ptr<Run>& owned) {
    Run& run = *owned;
    if (!run.params.final_status || run.lifecycle.release_pending() || !run.store_ops.empty() ||
        run.process || !expired(finished_time(run.params), settings_.keep_finished))
      return false;
    remove_finished_dir(run.id, run.dir);
    return true;
  });
}

void RunSupervisor::mark_held(Run& run, const std::string& reason) {
  run.held_reason = reason;
  run.on(RunEvent::hold);
  log::error("run not started here; its checkpoint is kept",
             {{"run_id", run.id}, {"branch", run.checkpoint.branch}, {"reason", reason}});
}

void RunSupervisor::finish_restore() {
  if (phase_ != Phase::restoring) return;
  phase_ = Phase::ready;
  start_queued();
}

// An attempt that cannot even be prepared (its run dir cannot be written: a
// full disk) leaves the run interrupted, as it is on disk, for shutdown to
// checkpoint and a later start to resume: nothing of it is lost.
void RunSupervisor::start_queued() {
  if (phase_ != Phase::ready) return;
  while (!queue_.empty() && live_children() < settings_.max_concurrent) {
    Run* run = queue_.front();
    queue_.pop_front();
    try {
      if (!attempts_.start(*run)) settle(*run, Outcome::failed);
    } catch (const std::exception& e) {
      log::error("attempt not started; the run stays interrupted",
                 {{"run_id", run->id}, {"error", e.what()}});
      run->on(RunEvent::interrupt);
    }
  }
}

int RunSupervisor::live_children() const {
  int live = 0;
  for (const auto& run : runs_) live += run->process.has_value();
  return live;
}

void RunSupervisor::begin_shutdown() {
  phase_ = Phase::shutting_down;
  if (settings_.models) settings_.models->begin_shutdown();
  disk_health_.stop();
  scheduler_.stop_periodic_checkpoints();
  // Queued runs, and deferred ones waiting for their backoff, stay unstarted.
  for (auto& run : runs_) {
    if (run->status() != RunStatus::queued) continue;
    run->on(RunEvent::shut_down);
    run->retry_timer.cancel();
  }
  queue_.clear();
  for (auto& run : runs_) {
    if (!run->process) continue;
    run->on(RunEvent::shut_down);
    run->process->signal(run->child->stop_signal());
  }
}

// Another instance owns a run that is not over: it leaves the queue, or its
// child stops. A running child's exit writes the fence's mark with its
// attempt's end.
void RunSupervisor::on_fenced(Run& run) {
  std::erase(queue_, &run);
  if (run.process) return attempts_.stop(run, RunEvent::fence);
  run.on(RunEvent::fence);
  run.write_params();
}

void RunSupervisor::kill_remaining() {
  for (auto& run : runs_)
    if (run->process) run->process->end();
}

}  // namespace inflight
