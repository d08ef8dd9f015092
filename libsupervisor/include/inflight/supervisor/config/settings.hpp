// Options of every command. Each is a flag, also read from the environment
// as INFLIGHT_<FLAG> and from the JSON config file as <flag_with_underscores>;
// flag wins over environment, environment over file, file over default.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "inflight/checkpoint/store_types.hpp"
#include "inflight/core/child_templates.hpp"
#include "inflight/core/duration.hpp"
#include "inflight/core/log.hpp"

namespace inflight {

// A command line, environment or config file that cannot work: exit 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct FlagSpec {
  const char* name;
  const char* help;
};

// Options of every command that touches the store.
extern const std::vector<FlagSpec> kStoreFlags;
// Options of every command that runs children: serve and resume.
extern const std::vector<FlagSpec> kRunFlags;
// Options of serve only.
extern const std::vector<FlagSpec> kServeFlags;

class OptionSources {
 public:
  using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

  // `flags` holds the flags given on the command line, by name without dashes.
  OptionSources(std::map<std::string, std::string> flags, OrderedJson file, EnvLookup env);

  // Reads and checks the config file named by --config or INFLIGHT_CONFIG.
  static OrderedJson load_config_file(const std::filesystem::path& path);
  static std::optional<std::string> process_env(const std::string& name);

  std::string text(const std::string& flag, const std::string& fallback) const;
  Duration duration(const std::string& flag, Duration fallback) const;
  std::int64_t integer(const std::string& flag, std::int64_t fallback, std::int64_t min,
                       std::int64_t max) const;
  std::vector<std::string> list(const std::string& flag, const std::string& fallback) const;
  const OrderedJson& file() const { return file_; }

 private:
  struct Found {
    std::string value;
    std::string source;  // for messages: `--flag`, `INFLIGHT_FLAG` or `config key flag`
  };
  std::optional<Found> lookup(const std::string& flag) const;

  std::map<std::string, std::string> flags_;
  OrderedJson file_;
  EnvLookup env_;
};

struct StoreSettings {
  std::string results_repo;
  std::filesystem::path runs_dir;
  std::string pod_name;
  std::string git_username;
  std::string git_token;
  std::filesystem::path git_ssh_key;
  std::filesystem::path git_ssh_known_hosts;
  std::filesystem::path git_ca_file;
  Duration git_timeout{60000};
  std::vector<std::string> checkpoint_exclude;
  checkpoint::TreeLimits restore_limits;
  int max_attempts = 3;
  log::Format log_format = log::Format::json;
};

struct ServeSettings {
  StoreSettings store;
  std::string listen_host;
  unsigned short listen_port = 3117;
  std::string api_token;
  int max_concurrent = 4;
  int max_queued = 1000;
  int max_connections = 256;
  Duration grace_period{30000};
  Duration flush_window{2000};
  Duration checkpoint_interval{30000};
  ChildTemplates children;
};

struct ResumeSettings {
  StoreSettings store;
  Duration grace_period{30000};
  Duration flush_window{2000};
  Duration checkpoint_interval{30000};
  ChildTemplates children;
};

StoreSettings read_store_settings(const OptionSources& sources);
// The config file's templates; ConfigError for a bad one.
ChildTemplates read_child_templates(const OptionSources& sources);
ResumeSettings read_resume_settings(const OptionSources& sources);
// Throws UsageError for a value that cannot work (a bad duration, a public
// --listen without --api-token); ConfigError for a bad child template.
ServeSettings read_serve_settings(const OptionSources& sources);

}  // namespace inflight
