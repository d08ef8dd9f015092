// The serve side of checkpoints: every store operation through the agent.
#include "inflight/supervisor/agent_client/agent_checkpoints.hpp"

#include <set>

#include "inflight/core/branch_name.hpp"
#include "inflight/core/log.hpp"
#include "inflight/core/run_params.hpp"

namespace inflight {

namespace fs = std::filesystem;

namespace {

// How many parts of each kind a batched answer must hold.
struct SaveAllParts {
  std::size_t runs = 0;
  bool lease = false;
  std::size_t finals = 0;
  bool index = false;
  std::size_t deletions = 0;
};

SaveAllParts parts_of(const SaveAllRequest& request) {
  return {.runs = request.runs.size(),
          .lease = request.lease_until.has_value(),
          .finals = request.finals.size(),
          .index = !request.indexed.empty(),
          .deletions = request.deletions.size()};
}

bool whole(const agent::SavedAll& reply, const SaveAllParts& parts) {
  return reply.runs.size() == parts.runs && (!parts.lease || reply.lease) &&
         reply.finals.size() == parts.finals && (!parts.index || reply.index) &&
         reply.deletions.size() == parts.deletions;
}

// A batched answer with a part per run, release step and the lease; the
// failure of the whole step is every part's.
SaveAllResult save_all_result(const AgentReply<agent::SavedAll>& reply, const SaveAllParts& parts) {
  if (!reply || !whole(*reply, parts)) {
    const Error failure = reply ? Error{.kind = Failure::other,
                                        .message = "the agent's answer lacks it",
                                        .candidates = {}}
                                : reply.error();
    const auto optional_failure = [&](bool asked) {
      return asked ? std::optional<CheckpointResult>(failure) : std::nullopt;
    };
    return {.runs = std::vector<CheckpointResult>(parts.runs, failure),
            .lease = optional_failure(parts.lease),
            .finals = std::vector<CheckpointResult>(parts.finals, failure),
            .index = optional_failure(parts.index),
            .deletions = std::vector<CheckpointResult>(parts.deletions, failure)};
  }
  return *reply;
}

}  // namespace

AgentCheckpoints::AgentCheckpoints(boost::asio::io_context& io, ChildReaper& reaper,
                                   const StoreSettings& store, fs::path runs_dir,
                                   const ChildTemplates& templates)
    : agent_(io, reaper, store, runs_dir), runs_dir_(std::move(runs_dir)), templates_(templates) {}

template <class Call>
void AgentCheckpoints::step(const Call& call, SteadyClock::time_point deadline,
                            std::function<void(CheckpointResult)> done) {
  agent_.call(call, deadline, [done = std::move(done)](AgentReply<typename Call::Answer> reply) {
    if (!reply) return done(reply.error());
    if constexpr (std::is_same_v<typename Call::Answer, agent::Saved>)
      done(*reply);
    else
      done(Landed{});
  });
}

void AgentCheckpoints::save(const CheckpointRequest& request, SteadyClock::time_point deadline,
                            std::function<void(CheckpointResult)> done) {
  step(agent::Save{.run = request}, deadline, std::move(done));
}

void AgentCheckpoints::release(const std::vector<CheckpointRequest>& requests,
                               SteadyClock::time_point deadline,
                               std::function<void(std::vector<CheckpointResult>)> done) {
  const agent::Release call{.runs = requests};
  agent_.call(call, deadline,
              [done = std::move(done), runs = requests.size()](AgentReply<agent::Released> reply) {
                if (reply && reply->runs.size() != runs)
                  reply = Error{.kind = Failure::other,
                                .message = "the agent's answer lacks a run",
                                .candidates = {}};
                std::vector<CheckpointResult> results;
                for (std::size_t i = 0; i < runs; ++i)
                  results.push_back(reply ? reply->runs[i] : CheckpointResult(reply.error()));
                done(std::move(results));
              });
}

void AgentCheckpoints::save_all(const SaveAllRequest& request, SteadyClock::time_point deadline,
                                std::function<void(SaveAllResult)> done) {
  auto call = request;
  call.streamed = false;
  agent_.call(call, deadline,
              [done = std::move(done), parts = parts_of(request)](
                  AgentReply<agent::SavedAll> reply) { done(save_all_result(reply, parts)); });
}

namespace {

// The agent's answer is awaited from the start: it may fail (be killed at
// the deadline) before the last part is written.
class AgentSaveStream final : public SaveStream {
 public:
  AgentSaveStream(AgentClient& agent, SteadyClock::time_point deadline)
      : answer_(std::make_shared<Answer>()),
        input_(agent.open(agent::SaveAll{.runs = {},
                                         .lease_until = std::nullopt,
                                         .release_lease = false,
                                         .keep_objects = false,
                                         .streamed = true},
                          deadline, [answer = answer_](AgentReply<agent::SavedAll> reply) {
                            answer->reply.emplace(std::move(reply));
                            answer->deliver();
                          })) {}
  ~AgentSaveStream() override { input_->close(); }

  void add(const CheckpointRequest& run) override {
    ++answer_->runs;
    input_->write(agent::SaveAllPart{
        .run = run, .last = false, .lease_until = std::nullopt, .release_lease = false});
  }

  void push(const SaveAllRequest& request, std::function<void(SaveAllResult)> done) override {
    answer_->lease = request.lease_until.has_value();
    answer_->done = std::move(done);
    input_->write(agent::SaveAllPart{.run = std::nullopt,
                                     .last = true,
                                     .lease_until = request.lease_until,
                                     .release_lease = request.release_lease});
    input_->close();
    answer_->deliver();
  }

 private:
  struct Answer {
    std::size_t runs = 0;
    bool lease = false;
    std::optional<AgentReply<agent::SavedAll>> reply;
    std::function<void(SaveAllResult)> done;

    void deliver() {
      if (!reply || !done) return;
      std::exchange(done, {})(save_all_result(*reply, {.runs = runs, .lease = lease}));
    }
  };

  std::shared_ptr<Answer> answer_;
  std::shared_ptr<AgentInput> input_;
};

}  // namespace

std::unique_ptr<SaveStream> AgentCheckpoints::open_save_all(SteadyClock::time_point deadline) {
  return std::make_unique<AgentSaveStream>(agent_, deadline);
}

void AgentCheckpoints::check(SteadyClock::time_point deadline,
                             std::function<void(CheckpointResult)> done) {
  step(agent::Check{}, deadline, std::move(done));
}

void AgentCheckpoints::hold_lease(SystemClock::time_point until, SteadyClock::time_point deadline,
                                  std::function<void(CheckpointResult)> done) {
  step(agent::HoldLease{.until = epoch_seconds(until)}, deadline, std::move(done));
}

void AgentCheckpoints::drop_lease(SteadyClock::time_point deadline,
                                  std::function<void(CheckpointResult)> done) {
  step(agent::DropLease{}, deadline, std::move(done));
}

void AgentCheckpoints::restore(const RestoreQuery& query, SteadyClock::time_point deadline,
                               std::function<void(RestoreResult)> done) {
  agent::Restore call{.runs_dir = runs_dir_.string(),
                      .local = {},
                      .skip = {query.skip.begin(), query.skip.end()},
                      .children = templates_.sources(),
                      .only = query.only,
                      .lease_until = epoch_seconds(query.lease_until),
                      .leave_handovers = query.leave_handovers,
                      .finished = query.finished,
                      .expired = query.expired,
                      .take_over = query.take_over};
  for (const auto& run : query.local)
    call.local.push_back({.run_id = run.params.run_id,
                          .attempts = run.params.attempts.size(),
                          .origin_pod = run.params.origin_pod});
  agent_.call(
      call, deadline,
      [this, local = query.local, done = std::move(done)](AgentReply<agent::Restored> reply) {
        if (!reply) return done(failed_restore(reply.error(), local));
        done(restore_result(*reply, local));
      });
}

// The store could not be asked: the local runs are resumed as they are.
RestoreResult AgentCheckpoints::failed_restore(const Error& failure,
                                               const std::vector<RestoredRun>& local) {
  RestoreResult result;
  result.runs = local;
  result.failure = failure;
  if (failure.kind != Failure::auth)
    log::error("restore from the results repo failed; resuming local runs only",
               {{"error", failure.message}});
  return result;
}

// The agent's report as runs to adopt: every claimed run, and the local runs
// that no branch spoke for.
RestoreResult AgentCheckpoints::restore_result(const agent::Restored& r,
                                               const std::vector<RestoredRun>& local) {
  RestoreResult result;
  std::set<std::string> problems(r.problems.begin(), r.problems.end());
  for (const auto& problem : problems)
    if (!last_problems_.contains(problem))
      log::warn("checkpoint not restored", {{"error", problem}});
  last_problems_ = std::move(problems);
  if (!r.indexed_by_libgit2.empty())
    log::info("restore: packs indexed by libgit2, not by inflight's own indexer",
              {{"packs", r.indexed_by_libgit2.size()}, {"why", r.indexed_by_libgit2.front()}});
  result.indexed_by_libgit2 = r.indexed_by_libgit2;
  result.disk_failure = r.disk_failure;
  result.published_partial = r.published_partial;
  for (const auto& branch : r.released)
    log::info("checkpoint branch of a finished run deleted", {{"branch", branch}});
  std::set<std::string> taken;
  result.claims_lost = r.lost.size();
  for (const auto& lost : r.lost) {
    taken.insert(lost);
    result.left.push_back({.run_id = lost, .pod = "", .until = 0});
    log::info("run claimed by another instance; left to it", {{"run_id", lost}});
  }
  for (const auto& left : r.left) {
    result.left.push_back(left);
    taken.insert(left.run_id);
    log::info("run held by another live instance; left to it",
              {{"run_id", left.run_id}, {"pod", left.pod}, {"until", left.until}});
  }
  for (const auto& held : r.held) {
    try {
      auto params = checkpoint::run_params_from_json(held.params);
      taken.insert(params.run_id);
      result.held.push_back({.params = std::move(params),
                             .branch = checkpoint::short_branch(held.branch),
                             .reason = held.reason});
    } catch (const std::exception& e) {
      log::error("held run not shown", {{"error", e.what()}});
    }
  }
  for (const auto& claimed : r.claimed) {
    const fs::path dir = claimed.dir;
    try {
      auto params = checkpoint::read_run_params(dir);
      if (!params) continue;
      taken.insert(params->run_id);
      result.runs.push_back({.dir = dir,
                             .params = std::move(*params),
                             .branch = checkpoint::short_branch(claimed.branch),
                             .claim = claimed.claim});
    } catch (const std::exception& e) {
      log::error("restored run not adopted", {{"dir", dir.string()}, {"error", e.what()}});
    }
  }
  result.published.emplace();
  for (const auto& run : r.published) {
    taken.insert(run.run_id);  // a local copy of it is stale: the run is over
    auto& published = result.published->emplace_back(
        checkpoint::PublishedRun{.run_id = run.run_id, .entry = std::nullopt});
    if (!run.entry) continue;
    if (auto entry = checkpoint::parse_index_entry(*run.entry); entry && entry->id == run.run_id)
      published.entry = std::move(*entry);
  }
  for (const auto& run : local)
    if (!taken.count(run.params.run_id)) result.runs.push_back(run);
  result.ambiguous = r.ambiguous;
  result.watched = r.watched;
  return result;
}

void AgentCheckpoints::look_up(
    const std::vector<std::string>& run_ids, SteadyClock::time_point deadline,
    std::function<void(Result<std::vector<checkpoint::LookedUpRun>>)> done) {
  agent_.call(agent::LookUp{.run_ids = run_ids}, deadline,
              [run_ids, done = std::move(done)](AgentReply<agent::LookedUpRuns> reply) {
                if (!reply) return done(reply.error());
                const auto& answers = reply->runs;
                if (answers.size() != run_ids.size() ||
                    !std::equal(answers.begin(), answers.end(), run_ids.begin(),
                                [](const agent::LookedUp& a, const std::string& id) {
                                  return a.run_id == id;
                                }))
                  return done(Error{Failure::other, "the agent answered for other runs", {}});
                std::vector<checkpoint::LookedUpRun> runs;
                for (std::size_t i = 0; i < run_ids.size(); ++i) {
                  const auto& run = answers[i];
                  auto& looked_up = runs.emplace_back(
                      checkpoint::LookedUpRun{.run_id = run_ids[i], .answer = run.published});
                  if (!run.entry) continue;
                  // An entry for another run, or none readable: published all the same.
                  if (auto entry = checkpoint::parse_index_entry(*run.entry);
                      entry && entry->id == run_ids[i])
                    looked_up.entry = std::move(*entry);
                }
                done(std::move(runs));
              });
}

}  // namespace inflight
