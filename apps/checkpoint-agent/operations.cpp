// The agent's side of AgentCheckpoints: one store operation per process, its
// request and answer the structs of agent_protocol.hpp.
#include "operations.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <set>

#include "inflight/checkpoint/agent_protocol.hpp"
#include "inflight/checkpoint/branch_listing.hpp"
#include "inflight/checkpoint/checkpoint_store.hpp"
#include "inflight/checkpoint/run_listing.hpp"
#include "inflight/core/child_templates.hpp"
#include "inflight/core/exit_code.hpp"
#include "inflight/core/fd.hpp"
#include "inflight/core/log.hpp"

namespace inflight {

namespace ck = checkpoint;

namespace {

ck::StoreConfig store_config(const AgentStore& s) {
  return {.cache_dir = s.cache_dir,
          .remote = {.url = s.url,
                     .username = s.username,
                     .token = s.token,
                     .ssh_key = s.ssh_key,
                     .ssh_known_hosts = s.known_hosts,
                     .ca_file = s.ca_file},
          .exclude_globs = s.excludes,
          .restore_limits = {.max_bytes = s.restore_max_bytes, .max_files = s.restore_max_files},
          .claim_lease = std::chrono::seconds(s.claim_lease_seconds),
          .publish = s.publish};
}

// The store and the instance that a request concerns.
struct Context {
  ck::CheckpointStore& store;
  const std::string& pod;
  // Whether the cache writes the objects the op made to disk afterwards:
  // the next step's parents and unchanged chunks come from there.
  bool keep_objects = true;
  // The next message on stdin, for an op whose parts follow its request;
  // throws when stdin ends first.
  std::function<OrderedJson()> next_message = {};
  std::uint64_t max_file_bytes = 0;  // of a file read whole: the restore limit
};

ck::CheckpointInfo checkpoint_info(const agent::RunCheckpoint& run, const std::string& pod) {
  return {.run_id = run.run_id,
          .attempt = run.attempt,
          .reason = run.reason,
          .pod = pod,
          .records = run.records,
          .total = run.total};
}

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

// Each run answers on its own, in the order asked.
agent::Released release(Context& c, const agent::Release& call) {
  agent::Released answer;
  for (const auto& outcome : c.store.release(save_requests(call.runs, c.pod)))
    answer.runs.push_back({.failure = outcome ? std::nullopt : std::optional(outcome.error()),
                           .commit = std::nullopt,
                           .left_out = {}});
  return answer;
}

std::optional<ck::LeaseStep> lease_step(const std::string& pod,
                                        const std::optional<std::int64_t>& until, bool release) {
  if (!until) return std::nullopt;
  return ck::LeaseStep{.lease = {.pod = pod, .until = *until}, .release = release};
}

agent::PartResult part_of(const Result<std::optional<std::string>>& step) {
  if (!step) return {.failure = step.error(), .commit = std::nullopt, .left_out = {}};
  return {.failure = std::nullopt, .commit = *step, .left_out = {}};
}

agent::PartResult part_of(const Result<void>& step) {
  return {.failure = step ? std::nullopt : std::optional(step.error()),
          .commit = std::nullopt,
          .left_out = {}};
}

agent::SavedAll saved_all(const ck::SaveAllReport& report, bool lease) {
  for (const auto& ref : report.rewritten)
    log::error(
        "a checkpoint branch was rewritten to a commit that is no checkpoint of its run (a "
        "force-push by hand?); not another owner: the run goes on, saved on top of it",
        {{"branch", ref}});
  agent::SavedAll answer;
  for (const auto& outcome : report.runs)
    answer.runs.push_back(
        {.failure = part_failure(outcome), .commit = outcome.commit, .left_out = outcome.left_out});
  if (lease)
    answer.lease = agent::PartResult{
        .failure = report.lease_error ? std::optional(Error{.kind = Failure::other,
                                                            .message = *report.lease_error,
                                                            .candidates = {}})
                                      : std::nullopt,
        .commit = std::nullopt,
        .left_out = {}};
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

agent::Restored restored(const ck::RestoreReport& report) {
  agent::Restored answer{.claimed = {},
                         .left = report.left,
                         .held = {},
                         .lost = report.lost,
                         .released = report.released,
                         .ambiguous = report.ambiguous,
                         .problems = report.problems,
                         .published = {},
                         .watched = report.watched};
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

agent::BranchInfo branch_info(const ck::BranchSummary& s) {
  return {.run_id = s.name.run_id,
          .origin_pod = s.name.pod,
          .branch = ck::short_branch(s.ref),
          .attempts = s.attempts,
          .time = s.tip.time,
          .records = s.tip.records,
          .size_bytes = s.size_bytes,
          .state = agent::BranchState::resumable,
          .reason = std::nullopt};
}

// What a restore by this instance would do with the branch: resume it, hold
// it (no such template, a request that no longer validates), refuse it, or
// delete it (the run is over).
void judge_branch(agent::BranchInfo& info, const ck::BranchSummary& branch,
                  const ChildTemplates& templates) {
  if (!branch.run_params) {
    info.state = agent::BranchState::refused;
    info.reason = branch.run_params.error().message;
    return;
  }
  try {
    const auto params = ck::run_params_from_json(*branch.run_params);
    if (params.final_status) {
      info.state = agent::BranchState::finished;
    } else if (auto refusal = templates.judge(params).refusal) {
      info.state = agent::BranchState::held;
      info.reason = *refusal;
    }
  } catch (const std::exception& e) {
    info.state = agent::BranchState::refused;
    info.reason = e.what();
  }
}

agent::Listed list(Context& c, const agent::List& call) {
  const auto templates = templates_of(call.children);
  const auto listing = ck::list_branches(c.store.cache(), c.store.remote(), call.pod);
  agent::Listed answer{
      .url = c.store.remote().display_url(), .checkpoints = {}, .problems = listing.problems};
  for (const auto& branch : listing.branches) {
    answer.checkpoints.push_back(branch_info(branch));
    judge_branch(answer.checkpoints.back(), branch, templates);
  }
  return answer;
}

agent::Shown show_branch(ck::CheckpointStore& store, const ck::RemoteBranch& branch) {
  const auto summary = ck::summarize_branch(store.cache(), store.remote(), branch);
  agent::Shown answer{.branch = branch_info(summary),
                      .tip = summary.tip.oid,
                      .history = {},
                      .run_params = summary.run_params ? *summary.run_params : OrderedJson()};
  for (const auto& commit : ck::history(store.cache(), summary.tip.oid)) {
    const auto c = ck::describe_commit(commit);
    answer.history.push_back({.oid = c.oid,
                              .time = c.time,
                              .reason = c.reason ? std::string(ck::to_string(*c.reason)) : "",
                              .attempt = c.attempt,
                              .pod = c.pod,
                              .records = c.records});
  }
  return answer;
}

// One run's branch, searched on every pod: not_found when no pod holds it,
// ambiguous when several do (the caller then names the branch).
Result<agent::Shown> show(Context& c, const agent::Show& call) {
  const auto found = ck::find_run_branches(c.store.remote(), call.run_id);
  if (found.empty())
    return Error{.kind = Failure::not_found,
                 .message = "no checkpoint branch for '" + call.run_id + "' on " +
                            c.store.remote().display_url(),
                 .candidates = {}};
  if (found.size() == 1) return show_branch(c.store, found.front());
  Error ambiguous{.kind = Failure::ambiguous,
                  .message = "'" + call.run_id + "' has checkpoints from several pods",
                  .candidates = {}};
  for (const auto& branch : found) ambiguous.candidates.push_back(ck::short_branch(branch.ref));
  return ambiguous;
}

// Finished runs among the planned branches are published first; a branch
// whose publication failed is kept, unless the call forces its deletion.
std::vector<std::string> publish_before_prune(ck::CheckpointStore& store, const ck::PrunePlan& plan,
                                              bool force, agent::Pruned& answer) {
  std::vector<std::string> deleting;
  const auto published = store.publish_before_prune(plan.refs, plan.listing);
  for (const auto& ref : plan.refs) {
    const auto it = published.find(ref);
    if (it != published.end() && it->second) {
      answer.published.push_back(ck::short_branch(ref));
    } else if (it != published.end() && !force) {
      answer.failed.push_back(
          {.branch = ck::short_branch(ref),
           .failure = {.kind = it->second.error().kind,
                       .message = "kept, not published (--force deletes it anyway): " +
                                  it->second.error().message,
                       .candidates = {}}});
      continue;
    }
    deleting.push_back(ref);
  }
  return deleting;
}

// A one-shot command cannot watch a lease for its term: a branch whose tip
// was written by a pod that holds a lease (and neither handed the run over
// nor finished it) is live, and kept.
std::vector<std::string> leave_live_branches(ck::CheckpointStore& store, const ck::PrunePlan& plan,
                                             agent::Pruned& answer) {
  std::set<std::string> leased;
  for (const auto& ref : plan.listing)
    if (auto pod = ck::parse_lease_ref(ref.ref)) leased.insert(std::move(*pod));
  std::vector<std::string> refs;
  for (const auto& ref : plan.refs) {
    const auto listed = std::find_if(plan.listing.begin(), plan.listing.end(),
                                     [&](const ck::RemoteBranch& b) { return b.ref == ref; });
    std::optional<ck::CheckpointCommit> tip;
    try {
      if (listed != plan.listing.end())
        tip = ck::describe_commit(
            ck::commit_summary(store.cache(), store.remote().fetch_listed(*listed)));
    } catch (const ck::GitError& e) {
      if (e.network()) throw;
    }
    const bool let_go = tip && (tip->reason == ck::CheckpointReason::shutdown ||
                                tip->reason == ck::CheckpointReason::final);
    if (tip && !let_go && leased.contains(tip->pod)) {
      answer.failed.push_back(
          {.branch = ck::short_branch(ref),
           .failure = {.kind = Failure::other,
                       .message = "live: pod " + tip->pod +
                                  " holds a lease and wrote its last checkpoint (--take-over "
                                  "deletes it anyway, once that pod is gone)",
                       .candidates = {}}});
      continue;
    }
    refs.push_back(ref);
  }
  return refs;
}

// Every deletion in one push; each branch is deleted or fails on its own.
agent::Pruned prune(Context& c, const agent::Prune& call) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  auto plan = ck::plan_prune(
      c.store.cache(), c.store.remote(),
      {.older_than_seconds = call.older_than_seconds, .run_ids = call.run_ids, .all = call.all},
      now);
  agent::Pruned answer{.url = c.store.remote().display_url(),
                       .deleted = {},
                       .failed = {},
                       .missing = plan.missing_run_ids,
                       .problems = plan.problems,
                       .published = {}};
  if (!call.take_over) plan.refs = leave_live_branches(c.store, plan, answer);
  const auto refs =
      call.dry_run ? plan.refs : publish_before_prune(c.store, plan, call.force, answer);
  std::vector<ck::RefUpdate> deletions;
  for (const auto& ref : refs) deletions.push_back({.ref = ref, .commit = "", .from = {}});
  std::vector<ck::RefResult> results(deletions.size());
  if (!call.dry_run && !deletions.empty()) results = c.store.remote().update(deletions);
  for (std::size_t i = 0; i < deletions.size(); ++i) {
    const auto branch = ck::short_branch(deletions[i].ref);
    if (results[i].outcome == ck::RefOutcome::updated)
      answer.deleted.push_back(branch);
    else
      answer.failed.push_back(
          {.branch = branch, .failure = ref_failure(results[i].outcome, results[i].detail)});
  }
  return answer;
}

agent::RunsListed list_runs(Context& c, const agent::ListRuns&) {
  auto listing = ck::list_runs(c.store.cache(), c.store.remote());
  return {.url = c.store.remote().display_url(),
          .runs = std::move(listing.runs),
          .problems = std::move(listing.problems)};
}

agent::RunShown show_run(Context& c, const agent::ShowRun& call) {
  const auto run = ck::fetch_run(c.store.remote(), call.run_id);
  const auto text =
      ck::read_file_at(c.store.cache(), run.commit, ck::kRunParamsFile, ck::kMaxRunParamsBytes);
  auto params = text ? parse_bounded_json(*text, {.max_bytes = ck::kMaxRunParamsBytes})
                     : Result<OrderedJson>(OrderedJson());
  return {.where = run.where, .run_params = params ? std::move(*params) : OrderedJson()};
}

// Only that run is downloaded; the caller made the file, so a link planted
// in its place is not followed.
agent::RunLogWritten run_log(Context& c, const agent::WriteRunLog& call) {
  const auto run = ck::fetch_run(c.store.remote(), call.run_id);
  const auto log = ck::read_file_at(c.store.cache(), run.commit, "console.log", c.max_file_bytes);
  if (!log) return {.where = run.where, .found = false};
  const Fd file(::open(call.path.c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC));
  if (!file) throw std::runtime_error("open " + call.path + ": " + std::strerror(errno));
  write_all(file.get(), *log, call.path);
  return {.where = run.where, .found = true};
}

agent::RunsPruned prune_runs(Context& c, const agent::PruneRuns& call) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  auto report = ck::prune_runs(c.store.cache(), c.store.remote(),
                               {.older_than_seconds = call.older_than_seconds,
                                .run_ids = call.run_ids,
                                .dry_run = call.dry_run},
                               now);
  return {.url = c.store.remote().display_url(),
          .deleted = std::move(report.deleted),
          .missing = std::move(report.missing),
          .problems = std::move(report.problems),
          .failed = std::move(report.failed)};
}

template <class Answer>
OrderedJson message(const Answer& answer) {
  return answer_message(answer);
}

template <class Answer>
OrderedJson message(const Result<Answer>& outcome) {
  if (!outcome) return failure_message(outcome.error());
  return answer_message(*outcome);
}

// The whole answer message of one op.
using Operation = std::function<OrderedJson(Context&, const OrderedJson& call)>;

// The op's call read into its struct, and its answer written from its struct.
template <class Call, class Result>
std::pair<std::string_view, Operation> operation(Result (*perform)(Context&, const Call&)) {
  return {Call::op, [perform](Context& c, const OrderedJson& call) {
            return message(perform(c, call.get<Call>()));
          }};
}

const std::map<std::string_view, Operation>& operations() {
  static const std::map<std::string_view, Operation> all{
      operation(check),      operation(save),       operation(save_all),  operation(release),
      operation(hold_lease), operation(drop_lease), operation(restore),   operation(list),
      operation(show),       operation(prune),      operation(list_runs), operation(show_run),
      operation(run_log),    operation(prune_runs)};
  return all;
}

// What the op pushed has landed whatever happens here: a cache that cannot
// keep it costs the next save a fetch of its parent, not this answer.
void keep_objects(ck::CheckpointStore& store) {
  try {
    store.persist();
  } catch (const ck::GitError& e) {
    log::warn("cache cannot keep the new objects", {{"error", e.what()}});
  }
}

// One message: a line of stdin, or the rest of it. Each is bounded.
std::optional<std::string> read_message(std::istream& in) {
  std::string text;
  for (int c = in.get(); c != EOF && c != '\n'; c = in.get()) {
    if (text.size() == kAgentMessageLimits.max_bytes)
      throw std::runtime_error("checkpoint-agent message longer than " +
                               std::to_string(kAgentMessageLimits.max_bytes) + " bytes");
    text.push_back(static_cast<char>(c));
  }
  if (text.empty() && in.eof()) return std::nullopt;
  return text;
}

OrderedJson parsed_message(const std::string& text) {
  auto message = parse_bounded_json(text, kAgentMessageLimits);
  if (!message) throw std::runtime_error("checkpoint-agent request: " + message.error().message);
  return std::move(*message);
}

OrderedJson next_message() {
  const auto text = read_message(std::cin);
  if (!text) throw std::runtime_error("checkpoint-agent request: stdin ended before its last part");
  return parsed_message(*text);
}

// The version and the op are read first: a caller of another release learns
// that, not which field it lacks.
OrderedJson perform(const OrderedJson& message) {
  const auto refused = [](std::string why) {
    return failure_message({.kind = Failure::other, .message = std::move(why), .candidates = {}});
  };
  const auto version = message.at("version").get<int>();
  if (version != kAgentProtocolVersion)
    return refused("the caller speaks protocol " + std::to_string(version) + ", this agent " +
                   std::to_string(kAgentProtocolVersion) +
                   ": install both binaries of one release");
  const auto name = message.at("op").get<std::string>();
  const auto op = operations().find(name);
  if (op == operations().end()) return refused("unknown checkpoint-agent op '" + name + "'");
  const auto request = message.get<AgentRequest>();
  ck::GitLibrary library;
  ck::CheckpointStore store(store_config(request.store));
  Context context{.store = store,
                  .pod = request.pod,
                  .next_message = next_message,
                  .max_file_bytes = request.store.restore_max_bytes};
  OrderedJson answer;
  try {
    answer = op->second(context, request.call);
  } catch (...) {
    // What the op pushed before it failed (a release's final state, before
    // its refused deletion) has landed: kept, or the next save builds on an
    // older commit and is judged another instance's.
    if (context.keep_objects) keep_objects(store);
    throw;
  }
  if (context.keep_objects) keep_objects(store);
  return answer;
}

OrderedJson answer() {
  try {
    return perform(parsed_message(read_message(std::cin).value_or("")));
  } catch (const ck::GitError& e) {
    return failure_message(e.error());
  } catch (const std::exception& e) {
    return failure_message({.kind = Failure::other, .message = e.what(), .candidates = {}});
  }
}

}  // namespace

int run_checkpoint_agent() {
  const auto result = answer();
  // Names from branches may not be UTF-8: they are shown replaced, never
  // allowed to abort the answer.
  std::cout << result.dump(-1, ' ', false, OrderedJson::error_handler_t::replace) << std::endl;
  return result["ok"].get<bool>() ? kExitSuccess : kExitFailure;
}

}  // namespace inflight
