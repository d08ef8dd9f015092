// One attempt of a run as a process: render its argv, record the attempt,
// start the child under the run shim in its own cgroup, watch its exit, and
// stop it. What follows an attempt's end (a retry, a release) is the
// supervisor's to decide: the runner only reports the outcome.
#pragma once

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "inflight/core/duration.hpp"
#include "inflight/supervisor/models/model_gateway.hpp"
#include "inflight/supervisor/process/child_reaper.hpp"
#include "inflight/supervisor/process/containment.hpp"
#include "inflight/supervisor/runs/run.hpp"

namespace inflight {

struct AttemptSettings {
  std::string pod_name;
  Duration stop_grace{};     // between the stop signal and the end of every process
  bool echo_output = false;  // also copy children's output to stdout
  Containment containment;   // how every process of an attempt ends with it
  std::vector<std::filesystem::path> hidden_files;  // ResumeSettings::hidden_files
  ModelGateway* models = nullptr;  // how children reach the config's models; none without
};

class AttemptRunner {
 public:
  // `exited`: an attempt's child ended (every process of it gone), with the
  // outcome classify() read from its wait status.
  AttemptRunner(boost::asio::io_context& io, ChildReaper& reaper, AttemptSettings settings,
                std::function<void(Run&, Outcome)> exited);

  // Starts the run's next attempt. False when its child could not be
  // started: the attempt's record says why, for the caller to settle as
  // failed. Throws when the run dir cannot be written; the attempt is then
  // not recorded.
  bool start(Run& run);
  // Moves the run by `stop` (RunEvent::stop, shut_down or fence) and sends
  // its template's stop signal to the group; every process of the attempt
  // ends if it is still there after the grace.
  void stop(Run& run, RunEvent stop);

 private:
  ContainedChild spawn(Run& run, const RenderContext& context, Fd console);
  void grant_models(Run& run, int attempt, RenderContext& context);
  void not_started(Run& run, const std::error_code& error);
  void on_exit(Run& run, int wait_status);

  boost::asio::io_context& io_;
  ChildReaper& reaper_;
  AttemptSettings settings_;
  std::function<void(Run&, Outcome)> exited_;
};

}  // namespace inflight
