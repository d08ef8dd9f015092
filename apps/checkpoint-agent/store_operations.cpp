// The store steps of the agent (operation_context.hpp): a checkpoint, a
// batched save (whole, or streamed one run at a time), a release, the lease,
// and a restore, each read from its request and answered in its struct.
#include <chrono>

#include "inflight/core/log.hpp"
#include "operation_context.hpp"

namespace inflight::agent_ops {

namespace {

ck::CheckpointInfo checkpoint_info(const agent::RunCheckpoint& run, const std::string& pod) {
  return {.run_id = run.run_id,
          .attempt = run.attempt,
          .reason = run.reason,
          .pod = pod,
          .records = run.records,
          .total = run.total};
}

std::optional<Error> part_failure(const ck::SaveOutcome& outcome) {
  if (!outcome.error) return std::nullopt;
  if (outcome.snapshot_failure)
    return Error{.kind = *outcome.snapshot_failure, .message = *outcome.error, .candidates = {}};
  return ref_failure(outcome.ref, *outcome.error);
}

std::vector<ck::SaveRequest> save_requests(const std::vector<agent::RunCheckpoint>& runs,
                                           const std::string& pod) {
  std::vector<ck::SaveRequest> requests;
  for (const auto& run : runs)
    requests.push_back(
        {.run_dir = run.run_dir, .origin_pod = run.origin_pod, .info = checkpoint_info(run, pod)});
  return requests;
}

std::optional<ck::LeaseStep> lease_step(const std::string& pod,
                                        const std::optional<std::int64_t>& until, bool release) {
  if (!until) return std::nullopt;
  return ck::LeaseStep{.lease = {.pod = pod, .until = *until}, .release = release};
}

agent::StepResult part_of(const Result<std::optional<std::string>>& step) {
  if (!step) return step.error();
  return agent::Saved{.commit = *step, .left_out = {}};
}

agent::StepResult part_of(const Result<void>& step) {
  if (!step) return step.error();
  return agent::Saved{};
}

agent::StepResult part_of(const ck::SaveOutcome& outcome) {
  if (auto failure = part_failure(outcome)) return *failure;
  return agent::Saved{.commit = outcome.commit, .left_out = outcome.left_out};
}

agent::SavedAll saved_all(const ck::SaveAllReport& report, bool lease) {
  for (const auto& ref : report.rewritten)
    log::error(
        "a checkpoint branch was rewritten to a commit that is no checkpoint of its run (a "
        "force-push by hand?); not another owner: the run goes on, saved on top of it",
        {{"branch", ref}});
  agent::SavedAll answer;
  for (const auto& outcome : report.runs) answer.runs.push_back(part_of(outcome));
  if (lease)
    answer.lease =
        report.lease_error
            ? agent::StepResult(
                  Error{.kind = Failure::other, .message = *report.lease_error, .candidates = {}})
            : agent::Saved{};
  for (const auto& step : report.finals) answer.finals.push_back(part_of(step));
  if (report.index) answer.index = part_of(*report.index);
  for (const auto& step : report.deletions) answer.deletions.push_back(part_of(step));
  return answer;
}

// The runs come one part at a time (agent_protocol.hpp): the connection is
// opened first, so that its handshake overlaps the children's flush, and
// each run's snapshot is taken as it comes.
agent::SavedAll streamed_save_all(Context& c) {
  c.store.remote().connect_ahead();
  std::vector<ck::SaveRequest> runs;
  std::vector<ck::SaveOutcome> snapshots;
  for (;;) {
    const auto part = c.next_message().get<agent::SaveAllPart>();
    if (part.run) {
      runs.push_back(save_requests({*part.run}, c.pod).front());
      snapshots.push_back(c.store.snapshot_to_save(runs.back()));
    }
    if (!part.last) continue;
    const auto lease = lease_step(c.pod, part.lease_until, part.release_lease);
    return saved_all(c.store.push_saved(runs, std::move(snapshots), lease, {}), lease.has_value());
  }
}

agent::Restored restored(const ck::RestoreReport& report) {
  agent::Restored answer{.claimed = {},
                         .left = report.left,
                         .held = {},
                         .lost = report.lost,
                         .released = report.released,
                         .ambiguous = report.ambiguous,
                         .problems = report.problems,
                         .published = {},
                         .watched = report.watched,
                         .indexed_by_libgit2 = report.indexed_by_libgit2,
                         .disk_failure = report.disk_failure,
                         .published_partial = report.published_partial};
  for (const auto& run : report.published)
    answer.published.push_back(
        {.run_id = run.run_id,
         .entry = run.entry ? std::optional(ck::write_index_entry(*run.entry)) : std::nullopt});
  for (const auto& run : report.claimed)
    answer.claimed.push_back({.run_id = run.params.run_id,
                              .dir = run.dir.string(),
                              .branch = run.branch,
                              .claim = run.claim});
  for (const auto& run : report.held)
    answer.held.push_back(
        {.params = ck::to_json(run.params), .branch = run.branch, .reason = run.reason});
  return answer;
}

}  // namespace

agent::Done check(Context& c, const agent::Check&) {
  c.store.cache().check_writable();
  return {};
}

Result<agent::Saved> save(Context& c, const agent::Save& call) {
  auto commit =
      c.store.save(call.run.run_dir, call.run.origin_pod, checkpoint_info(call.run, c.pod));
  if (!commit) return commit.error();
  return agent::Saved{.commit = std::move(*commit), .left_out = c.store.left_out(call.run.run_dir)};
}

// A ref judged against this pod is `rejected`: another instance owns the run.
Error ref_failure(ck::RefOutcome outcome, std::string message) {
  return {.kind = ck::failure_of(outcome), .message = std::move(message), .candidates = {}};
}

// Each run answers on its own, in the order asked.
agent::Released release(Context& c, const agent::Release& call) {
  agent::Released answer;
  for (const auto& outcome : c.store.release(save_requests(call.runs, c.pod)))
    answer.runs.push_back(outcome ? agent::StepResult(agent::Saved{}) : outcome.error());
  return answer;
}

// Each run answers as save() would, in the order asked. The lease, when
// asked for, rides in the same push as the runs.
agent::SavedAll save_all(Context& c, const agent::SaveAll& call) {
  c.keep_objects = call.keep_objects;
  if (call.streamed) return streamed_save_all(c);
  const auto lease = lease_step(c.pod, call.lease_until, call.release_lease);
  const ck::ReleaseSteps release{.finals = save_requests(call.finals, c.pod),
                                 .indexed = call.indexed,
                                 .deletions = save_requests(call.deletions, c.pod)};
  return saved_all(c.store.save_all(save_requests(call.runs, c.pod), lease, release),
                   lease.has_value());
}

agent::Done hold_lease(Context& c, const agent::HoldLease& call) {
  ck::hold_lease(c.store.cache(), c.store.remote(), {.pod = c.pod, .until = call.until});
  return {};
}

agent::Done drop_lease(Context& c, const agent::DropLease&) {
  ck::drop_lease(c.store.remote(), c.pod);
  return {};
}

// The instance's templates, sent by the caller so that a branch is judged
// before it is claimed.
ChildTemplates templates_of(const OrderedJson& children) {
  return ChildTemplates::from_config({{"children", children}}, "");
}

agent::Restored restore(Context& c, const agent::Restore& call) {
  const auto templates = templates_of(call.children);
  std::map<std::string, ck::LocalRun> local;
  for (const auto& run : call.local)
    local[run.run_id] = {.attempts = run.attempts, .origin_pod = run.origin_pod};
  return restored(c.store.restore(
      {.runs_dir = call.runs_dir,
       .pod = c.pod,
       .local = std::move(local),
       .judge = [&templates](const ck::RunParams& params) { return templates.judge(params); },
       .only = call.only,
       .lease_until = call.lease_until,
       .skip = {call.skip.begin(), call.skip.end()},
       .leave_handovers = call.leave_handovers,
       .expired = call.expired,
       .take_over = call.take_over,
       .finished = call.finished}));
}

agent::LookedUpRuns look_up(Context& c, const agent::LookUp& call) {
  agent::LookedUpRuns answer;
  for (const auto& run : c.store.look_up(call.run_ids))
    answer.runs.push_back(
        {.run_id = run.run_id,
         .published = run.answer,
         .entry = run.entry ? std::optional(ck::write_index_entry(*run.entry)) : std::nullopt});
  return answer;
}

}  // namespace inflight::agent_ops
