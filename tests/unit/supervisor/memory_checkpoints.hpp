// An in-memory CheckpointPort, so that the supervisor's logic (RunSupervisor,
// ShutdownPlan, PodLease, Restoration) is tested without the agent, git or a
// network. It keeps the port's promises (checkpoint_port.hpp): every call
// completes later, on the io_context, and never after its deadline. Every
// call is recorded, and each can be scripted to land, be fenced, fail, find
// the disk failed, or stall until the test finishes it or its deadline passes.
#pragma once

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "inflight/core/run_params.hpp"
#include "inflight/supervisor/checkpoint_port.hpp"

namespace inflight {

// How the fake answers one call. `stall`: no answer until finish_stalled(),
// or a failure at the call's deadline, as the real port gives.
// `land_leaving_out`: landed, with kLeftOutByFake left out of it;
// `over_limit`: the run dir holds more than a restore takes.
enum class Answer { land, land_leaving_out, fenced, refused, fail, disk_failed, over_limit, stall };

inline const checkpoint::LeftOut kLeftOutByFake{
    .named = {{.path = "out/pipe", .rule = "FIFO"}, {.path = "out/link", .rule = "symbolic link"}},
    .unnamed = 0};

// What a scripted answer applies to. `lease` covers hold_lease(), drop_lease()
// and the lease in a save_all(); `save`, each run of save() and save_all().
enum class Step { save, release, lease, check };

class MemoryCheckpoints final : public CheckpointPort {
 public:
  explicit MemoryCheckpoints(boost::asio::io_context& io) : io_(io) {}

  // Every later call of `step` (land until told otherwise).
  void answer(Step step, Answer answer) { defaults_[step] = answer; }
  // The next call of `step` only; before answer()'s, in the order given.
  void answer_next(Step step, Answer answer) { next_[step].push_back(answer); }
  // Every later save of that run, before any other script of saves.
  void answer_saves_of(const std::string& run_id, Answer answer) { by_run_[run_id] = answer; }
  // What the next restore() reports (nothing found, when not scripted). Its
  // runs are materialised: their dirs are made and hold their run-params.
  void restore_next(RestoreResult result) { restores_next_.push_back(std::move(result)); }
  // What look_up() answers of a run id from now on (`no`, when not scripted).
  void published_elsewhere(checkpoint::LookedUpRun run) {
    auto id = run.run_id;
    published_elsewhere_.insert_or_assign(std::move(id), std::move(run));
  }
  // Every run id look_up() was asked about, in call order.
  const std::vector<std::string>& looked_up() const { return looked_up_; }
  // Answers every stalled call with `answer`.
  void finish_stalled(Answer answer) {
    for (auto stalled = std::exchange(stalled_, {}); const auto& call : stalled) {
      call->timer.cancel();
      call->finish(answer);
    }
  }

  // Every run saved, by save() and save_all(), in call order.
  const std::vector<CheckpointRequest>& saves() const { return saves_; }
  std::vector<std::string> saved_runs(checkpoint::CheckpointReason reason) const {
    std::vector<std::string> ids;
    for (const auto& save : saves_)
      if (save.reason == reason) ids.push_back(save.run_id);
    return ids;
  }
  const std::vector<SaveAllRequest>& batches() const { return batches_; }
  // Every run released, in call order, and how many each call released.
  const std::vector<CheckpointRequest>& releases() const { return releases_; }
  const std::vector<std::size_t>& release_batches() const { return release_batches_; }
  const std::vector<SystemClock::time_point>& lease_holds() const { return lease_holds_; }
  int lease_drops() const { return lease_drops_; }
  const std::vector<RestoreQuery>& restores() const { return restores_; }
  int checks() const { return checks_; }
  std::size_t stalled() const { return stalled_.size(); }

  void save(const CheckpointRequest& request, SteadyClock::time_point deadline,
            std::function<void(CheckpointResult)> done) override {
    saves_.push_back(request);
    reply(next_answer(Step::save, request.run_id), deadline, std::move(done), result_of);
  }

  // Each run, release step and the lease takes its next answer (release
  // steps: Step::release's); a stall of any stalls the whole push.
  void save_all(const SaveAllRequest& request, SteadyClock::time_point deadline,
                std::function<void(SaveAllResult)> done) override {
    batches_.push_back(request);
    std::vector<Answer> answers;
    for (const auto& run : request.runs) {
      saves_.push_back(run);
      answers.push_back(next_answer(Step::save, run.run_id));
    }
    const bool lease = request.lease_until.has_value();
    if (lease) answers.push_back(next_answer(Step::lease));
    for (const auto& run : request.finals) {
      release_steps_.push_back("final " + run.run_id);
      answers.push_back(next_answer(Step::release, run.run_id));
    }
    // Entries ride with the finals too (checkpoint::ReleaseSteps).
    const bool index = !request.indexed.empty() || !request.finals.empty();
    if (!request.indexed.empty())
      release_steps_.push_back("index " + std::to_string(request.indexed.size()));
    if (index) answers.push_back(next_answer(Step::release));
    for (const auto& run : request.deletions) {
      release_steps_.push_back("delete " + run.run_id);
      answers.push_back(next_answer(Step::release, run.run_id));
    }
    const bool stalls = std::find(answers.begin(), answers.end(), Answer::stall) != answers.end();
    reply(stalls ? Answer::stall : Answer::land, deadline, std::move(done),
          [answers, request, lease, index](Answer whole) {
            // A part that stalled takes the answer that ends the stall; a
            // push that failed as a whole fails every part.
            auto next = answers.begin();
            auto part = [whole, &next] {
              const Answer own = *next++;
              return result_of(own == Answer::stall || whole != Answer::land ? whole : own);
            };
            SaveAllResult result;
            for (std::size_t i = 0; i < request.runs.size(); ++i) result.runs.push_back(part());
            if (lease) result.lease = part();
            for (std::size_t i = 0; i < request.finals.size(); ++i) result.finals.push_back(part());
            if (index) result.index = part();
            for (std::size_t i = 0; i < request.deletions.size(); ++i)
              result.deletions.push_back(part());
            return result;
          });
  }
  // The release steps save_all() took, in order: "final <id>", "index <n>", "delete <id>".
  const std::vector<std::string>& release_steps() const { return release_steps_; }

  // The runs are collected and pushed as one save_all() (batches() shows it);
  // streamed() lists each run when it was added.
  std::unique_ptr<SaveStream> open_save_all(SteadyClock::time_point deadline) override {
    ++streams_opened_;
    return std::make_unique<Stream>(*this, deadline);
  }
  int streams_opened() const { return streams_opened_; }
  const std::vector<std::string>& streamed() const { return streamed_; }

  // Each run of a batch takes the next release answer; a stall of any
  // stalls the batch, which then ends as the stall does.
  void release(const std::vector<CheckpointRequest>& requests, SteadyClock::time_point deadline,
               std::function<void(std::vector<CheckpointResult>)> done) override {
    release_batches_.push_back(requests.size());
    std::vector<Answer> answers;
    for (const auto& request : requests) {
      releases_.push_back(request);
      answers.push_back(next_answer(Step::release));
    }
    const bool stalls = std::find(answers.begin(), answers.end(), Answer::stall) != answers.end();
    reply(stalls ? Answer::stall : Answer::land, deadline, std::move(done),
          [answers](Answer whole) {
            std::vector<CheckpointResult> results;
            for (const auto own : answers)
              results.push_back(
                  result_of(own == Answer::stall || whole != Answer::land ? whole : own));
            return results;
          });
  }

  void check(SteadyClock::time_point deadline,
             std::function<void(CheckpointResult)> done) override {
    ++checks_;
    reply(next_answer(Step::check), deadline, std::move(done), result_of);
  }

  void restore(const RestoreQuery& query, SteadyClock::time_point deadline,
               std::function<void(RestoreResult)> done) override {
    restores_.push_back(query);
    RestoreResult result;
    if (!restores_next_.empty()) {
      result = std::move(restores_next_.front());
      restores_next_.pop_front();
    }
    for (const auto& run : result.runs) {
      std::filesystem::create_directories(run.dir);
      checkpoint::write_run_params(run.dir, run.params);
    }
    reply(Answer::land, deadline, std::move(done), [result](Answer) { return result; });
  }

  void hold_lease(SystemClock::time_point until, SteadyClock::time_point deadline,
                  std::function<void(CheckpointResult)> done) override {
    lease_holds_.push_back(until);
    reply(next_answer(Step::lease), deadline, std::move(done), result_of);
  }

  void drop_lease(SteadyClock::time_point deadline,
                  std::function<void(CheckpointResult)> done) override {
    ++lease_drops_;
    reply(next_answer(Step::lease), deadline, std::move(done), result_of);
  }

  void look_up(const std::vector<std::string>& run_ids, SteadyClock::time_point deadline,
               std::function<void(Result<std::vector<checkpoint::LookedUpRun>>)> done) override {
    std::vector<checkpoint::LookedUpRun> runs;
    for (const auto& id : run_ids) {
      looked_up_.push_back(id);
      const auto known = published_elsewhere_.find(id);
      runs.push_back(known != published_elsewhere_.end() ? known->second
                                                         : checkpoint::LookedUpRun{.run_id = id});
    }
    reply(Answer::land, deadline, std::move(done),
          [runs](Answer) { return Result<std::vector<checkpoint::LookedUpRun>>(runs); });
  }

 private:
  class Stream final : public SaveStream {
   public:
    Stream(MemoryCheckpoints& store, SteadyClock::time_point deadline)
        : store_(store), deadline_(deadline) {}
    void add(const CheckpointRequest& run) override {
      store_.streamed_.push_back(run.run_id);
      runs_.push_back(run);
    }
    void push(const SaveAllRequest& request, std::function<void(SaveAllResult)> done) override {
      SaveAllRequest whole = request;
      whole.runs = runs_;
      store_.save_all(whole, deadline_, std::move(done));
    }

   private:
    MemoryCheckpoints& store_;
    SteadyClock::time_point deadline_;
    std::vector<CheckpointRequest> runs_;
  };

  int streams_opened_ = 0;
  std::vector<std::string> release_steps_;
  std::vector<std::string> streamed_;
  struct StalledCall {
    explicit StalledCall(boost::asio::io_context& io) : timer(io) {}
    boost::asio::steady_timer timer;
    std::function<void(Answer)> finish;
  };

  Answer next_answer(Step step, const std::string& run_id = "") {
    if (const auto it = by_run_.find(run_id); step == Step::save && it != by_run_.end())
      return it->second;
    if (auto& queued = next_[step]; !queued.empty()) {
      const auto answer = queued.front();
      queued.pop_front();
      return answer;
    }
    return defaults_.contains(step) ? defaults_[step] : Answer::land;
  }

  static CheckpointResult failed(Failure kind, std::string message) {
    return Error{.kind = kind, .message = std::move(message), .candidates = {}};
  }

  static CheckpointResult result_of(Answer answer) {
    static int commits = 0;
    switch (answer) {
      case Answer::land:
        return Landed{.commit = "c0mm17" + std::to_string(++commits), .left_out = {}};
      case Answer::land_leaving_out:
        return Landed{.commit = "c0mm17" + std::to_string(++commits), .left_out = kLeftOutByFake};
      case Answer::fenced:
        return failed(Failure::rejected, "another instance owns the run");
      case Answer::refused:
        return failed(Failure::refused, "pre-receive hook declined");
      case Answer::disk_failed:
        return failed(Failure::cache, "the cache repo cannot be written");
      case Answer::over_limit:
        return failed(Failure::over_limit, "checkpoint has more than 3 files");
      case Answer::fail:
      case Answer::stall:
        break;
    }
    return failed(Failure::unreachable, "the results repo did not answer");
  }

  // Answers later on the io_context: at once, or, for a stall, when the test
  // finishes it or at the deadline (a failure).
  template <class Reply>
  void reply(Answer answer, SteadyClock::time_point deadline, std::function<void(Reply)> done,
             std::type_identity_t<std::function<Reply(Answer)>> result_for) {
    auto post = [this, done = std::move(done), result_for](Answer a) {
      boost::asio::post(io_, [done, result = result_for(a)] { done(result); });
    };
    if (answer != Answer::stall) return post(answer);
    auto call = std::make_shared<StalledCall>(io_);
    call->finish = std::move(post);
    call->timer.expires_at(deadline);
    // Weak: a call still stalled when the fake goes is dropped with it.
    call->timer.async_wait([this, weak = std::weak_ptr(call)](const boost::system::error_code& ec) {
      const auto call = weak.lock();
      if (ec || !call) return;
      std::erase(stalled_, call);
      call->finish(Answer::fail);
    });
    stalled_.push_back(call);
  }

  boost::asio::io_context& io_;
  std::map<Step, Answer> defaults_;
  std::map<Step, std::deque<Answer>> next_;
  std::map<std::string, Answer> by_run_;
  std::deque<RestoreResult> restores_next_;
  std::map<std::string, checkpoint::LookedUpRun> published_elsewhere_;
  std::vector<std::string> looked_up_;
  std::list<std::shared_ptr<StalledCall>> stalled_;
  std::vector<CheckpointRequest> saves_;
  std::vector<SaveAllRequest> batches_;
  std::vector<CheckpointRequest> releases_;
  std::vector<std::size_t> release_batches_;
  std::vector<SystemClock::time_point> lease_holds_;
  int lease_drops_ = 0;
  std::vector<RestoreQuery> restores_;
  int checks_ = 0;
};

}  // namespace inflight
