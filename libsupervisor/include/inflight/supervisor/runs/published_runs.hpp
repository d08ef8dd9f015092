// What this pod knows of the runs published by any pod (docs/results.md "The history layout"):
// a submit of one starts nothing and is answered with its final status. Each restore that
// reached the store lists them. On layout 2 it lists only the runs with a result ref
// (RestoreResult::published_partial): reading the log that holds the others would cost every
// pod's start the whole history. Any other run id a client names is then looked up in the store
// before its run may start.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "inflight/checkpoint/index_entry.hpp"
#include "inflight/checkpoint/store_types.hpp"
#include "inflight/core/clock.hpp"
#include "inflight/core/failure.hpp"

namespace inflight {

class CheckpointPort;

class PublishedRuns {
 public:
  explicit PublishedRuns(CheckpointPort& store) : store_(store) {}

  // What the last restore that reached the store found, in place of what was known.
  void know(std::vector<checkpoint::PublishedRun> runs, bool partial);
  // Whether run `id` is known to be published; its entry, when known too.
  bool contains(const std::string& id) const { return published_.contains(id); }
  const std::optional<checkpoint::IndexEntry>& entry(const std::string& id) const {
    return published_.at(id);
  }
  // Whether a submit of `id`, not held here, must look it up first: on a partial list, one not
  // known published, or known without its entry (a result ref listed: its entry tells its status).
  bool must_look_up(const std::string& id) const {
    return partial_ && (!contains(id) || !published_.at(id));
  }
  // Asks the store whether `id` is published. `done` gets nullopt once the answer is in
  // (contains() tells it), or why there is none: a failure, or a store that cannot tell.
  void look_up(const std::string& id, SteadyClock::time_point deadline,
               std::function<void(std::optional<Error>)> done);

 private:
  CheckpointPort& store_;
  std::map<std::string, std::optional<checkpoint::IndexEntry>> published_;
  bool partial_ = false;
};

}  // namespace inflight
