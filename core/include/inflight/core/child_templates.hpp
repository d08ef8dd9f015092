// The instance's named child templates (docs/security.md "What runs is decided by the config"): the
// only source of what a run executes. A run records the name of its template; every attempt, and
// every restore, looks that name up here and validates the run's request again, so a checkpoint
// branch contributes data and never code.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "inflight/core/child_template.hpp"
#include "inflight/core/model_specs.hpp"
#include "inflight/core/run_params.hpp"

namespace inflight {

// What the instance makes of a run before anything is claimed or written.
struct RunVerdict {
  std::optional<std::string> refusal;  // why this instance cannot run it
  std::string progress_file;           // the configured one, relative to the run dir
  std::optional<std::uint64_t> progress_total = std::nullopt;  // records when done, when known
};

class ChildTemplates {
 public:
  // From the config file's `child` (the template named `default`) and
  // `children`; the built-in demo template when the file has neither.
  // Throws ConfigError naming the key that is wrong.
  static ChildTemplates from_config(const OrderedJson& file,
                                    const std::filesystem::path& demo_binary);

  const ChildTemplate* find(const std::string& name) const;
  // Accepted, with the configured progress file, or why this instance cannot
  // run `params`: a template name it does not have, a request that no longer
  // validates.
  RunVerdict judge(const checkpoint::RunParams& params) const;
  // A program that cannot be started (not found on PATH, not executable):
  // found at start, not at the first attempt. Throws ConfigError naming it.
  void check_programs() const;

  // {name: template}, as the config gave them: what the checkpoint agent
  // needs to judge branches before it claims them.
  OrderedJson sources() const;
  std::string names() const;  // `agentv, promptfoo`, for messages
  // The config has no template: the built-in demo stands in.
  bool built_in_only() const { return built_in_only_; }
  // Every NAME that an `env` value refers to as `${NAME}`, and every name an
  // `inherit_env` lists: what some template's children get, blanked in
  // serve's own environment block.
  std::set<std::string> referenced_variables() const;

  // A template naming a model `models` lacks, or handing a child a model's
  // key by `${NAME}` or `inherit_env`: ConfigError naming it. Checked where
  // the config's models are known, not by the checkpoint agent, which gets
  // the templates alone.
  void check_models(const ModelSpecs& models) const;

 private:
  std::map<std::string, ChildTemplate> templates_;
  bool built_in_only_ = false;  // the config has none: the demo stands in
};

}  // namespace inflight
