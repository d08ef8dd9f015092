// Options of every command, as settings. Each option of the options table
// (options.hpp) is a flag, also read from the environment as INFLIGHT_<FLAG>
// and from the JSON config file as <flag_with_underscores>; flag wins over
// environment, environment over file, file over the table's default.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "inflight/checkpoint/store_types.hpp"
#include "inflight/core/child_templates.hpp"
#include "inflight/core/duration.hpp"
#include "inflight/core/log.hpp"
#include "inflight/supervisor/config/options.hpp"
#include "inflight/supervisor/models/model_settings.hpp"
#include "inflight/supervisor/process/containment.hpp"

namespace inflight {

// A command line, environment or config file that cannot work: exit 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class OptionSources {
 public:
  using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

  // `flags` holds the flags given on the command line, by name without dashes.
  OptionSources(std::map<std::string, std::string> flags, OrderedJson file, EnvLookup env);

  // Reads and checks the config file named by --config or INFLIGHT_CONFIG.
  static OrderedJson load_config_file(const std::filesystem::path& path);
  static std::optional<std::string> process_env(const std::string& name);

  // The value of the option named `name` in the options table, from the
  // first source that has it, else the table's default, read by the same
  // parser; UsageError naming the source and the bad word.
  std::string text(std::string_view name) const;
  Duration duration(std::string_view name) const;
  std::int64_t integer(std::string_view name) const;  // within the table's range
  std::vector<std::string> list(std::string_view name) const;
  // The value only when a flag, the environment or the file gives one.
  std::optional<std::string> given(std::string_view name) const;
  // Where that value comes from, for messages: `--flag`, `INFLIGHT_FLAG` or
  // `config key flag`; nullopt when no source gives one.
  std::optional<std::string> source(std::string_view name) const;
  const OrderedJson& file() const { return file_; }
  // A variable of the instance's environment (a model's api_key_env).
  std::optional<std::string> environment(const std::string& name) const;

 private:
  struct Found {
    std::string value;
    std::string source;  // for messages: `--flag`, `INFLIGHT_FLAG` or `config key flag`
  };
  std::optional<Found> lookup(const OptionSpec& spec) const;
  // The given value, else the table's default.
  Found value(std::string_view name) const;

  std::map<std::string, std::string> flags_;
  OrderedJson file_;
  EnvLookup env_;
};

// Every member is set by the readers below, from the options table: none
// has a default of its own.
struct StoreSettings {
  std::string results_repo;
  std::filesystem::path runs_dir;
  std::string pod_name;
  std::string git_username;
  std::string git_token;
  // Where git_token was read from, when --git-token-file gave it: kept so
  // that the file can be kept from children.
  std::filesystem::path git_token_file;
  std::filesystem::path git_ssh_key;
  std::filesystem::path git_ssh_known_hosts;
  std::filesystem::path git_ca_file;
  Duration git_timeout{};
  // Every agent is killed at its deadline, which is --git-timeout, or the grace period for a
  // shutdown's push (read_resume_settings): the longest of them.
  Duration longest_agent_step{};
  std::vector<std::string> checkpoint_exclude;
  checkpoint::TreeLimits restore_limits;
  bool publish{};                    // finished runs are published before their branch goes
  Duration results_ref_retention{};  // docs/results.md "The history layout"
  int results_layout{};              // checkpoint::StoreConfig::results_layout
  int max_attempts{};
  int max_interruptions{};
  log::Format log_format{};
  // The `${NAME}` variables of the child templates (read_resume_settings):
  // secrets of those children, kept from the checkpoint agent's environment.
  std::set<std::string> withheld_variables;
};

// What serve and resume both take: the options of commands that run children.
struct ResumeSettings {
  StoreSettings store;
  Duration grace_period{};
  Duration flush_window{};
  Duration checkpoint_interval{};
  ContainmentMode containment{};
  ChildTemplates children;
  ModelSettings models;  // the config's `models`, their keys and the journal's limits
  // The secret files given (token files, config, SSH key, model key files): the
  // run shim hides them from children (docs/security.md "Process containment").
  std::vector<std::filesystem::path> hidden_files;
};

struct ServeSettings : ResumeSettings {
  std::string listen_host;
  unsigned short listen_port{};
  std::string api_token;
  std::filesystem::path api_token_file;  // as git_token_file
  int max_concurrent{};
  int max_queued{};
  int max_connections{};
  int max_connections_per_client{};
  Duration keep_finished{};
};

// A token file is a token, not a document: a larger one is a wrong path.
inline constexpr std::size_t kMaxTokenFileBytes = 64 * 1024;

// The part of the grace period that a shutdown keeps for its checkpoint push
// whatever the flush window: max(1 s, 5 % of the grace period).
Duration push_margin(Duration grace_period);

// Throws UsageError for a token given both as itself and as a file, or a
// token file that is unreadable, empty or over kMaxTokenFileBytes.
StoreSettings read_store_settings(const OptionSources& sources);
// Logs where checkpoints go (the results repo without credentials, publish,
// pod, runs dir), warning of a results repo on a local path.
void log_destination(const StoreSettings& store);
// The config file's templates; ConfigError for a bad one.
ChildTemplates read_child_templates(const OptionSources& sources);
// The config's `models` with their keys, and the --model-* options.
// UsageError for a key that cannot be read, a listener that is not loopback,
// a journal limit over half of --restore-max-bytes.
ModelSettings read_model_settings(const OptionSources& sources, const StoreSettings& store);
// The variables of serve's environment blanked where the kernel shows them:
// the templates' `${NAME}` secrets and `inherit_env`, and the models' keys.
ModelSpecs model_specs(const ModelSettings& models);
std::set<std::string> withheld_variables(const ChildTemplates& children,
                                         const ModelSettings& models);
ResumeSettings read_resume_settings(const OptionSources& sources);
// Throws UsageError for a value that cannot work (a bad duration, a public
// --listen without --api-token, a --flush-window that leaves less than
// push_margin of --grace-period); ConfigError for a bad child template.
ServeSettings read_serve_settings(const OptionSources& sources);

}  // namespace inflight
