// See published_runs.hpp.
#include "inflight/supervisor/runs/published_runs.hpp"

#include "inflight/supervisor/checkpoint_port.hpp"

namespace inflight {

void PublishedRuns::know(std::vector<checkpoint::PublishedRun> runs, bool partial) {
  published_.clear();
  for (auto& run : runs) published_.emplace(std::move(run.run_id), std::move(run.entry));
  partial_ = partial;
}

void PublishedRuns::look_up(const std::string& id, SteadyClock::time_point deadline,
                            std::function<void(std::optional<Error>)> done) {
  store_.look_up(
      {id}, deadline,
      [this, id, done = std::move(done)](Result<std::vector<checkpoint::LookedUpRun>> answer) {
        if (!answer) return done(answer.error());
        using Answer = checkpoint::LookedUpRun::Answer;
        auto& run = answer->front();
        if (run.answer == Answer::unknown)
          return done(Error{Failure::other,
                            "the results repo cannot tell whether run " + id +
                                " is published: its server serves no marker by id",
                            {}});
        // A "no" is not kept: another pod may publish the run at any time.
        if (run.answer == Answer::yes) published_.insert_or_assign(id, std::move(run.entry));
        done(std::nullopt);
      });
}

}  // namespace inflight
