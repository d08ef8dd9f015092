// The child template (docs/serve.md "The config file and the child templates"): how a run request
// becomes an argv. No shell is involved anywhere; every value lands in exactly one argv element.
#pragma once

#include <csignal>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "inflight/core/duration.hpp"
#include "inflight/core/run_params.hpp"

namespace inflight {

using OrderedJson = nlohmann::ordered_json;

// A bad config; `key` is the dotted path of the offending key.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string key, const std::string& message)
      : std::runtime_error(key + ": " + message), key_(std::move(key)) {}
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

// A request that the template refuses; `param` names the offending param.
struct ParamError {
  std::string param;
  std::string message;
};

enum class ParamType { string, integer, array };

struct ValueRule {
  ParamType type = ParamType::string;
  std::optional<std::regex> pattern;
  std::optional<std::int64_t> min;
  std::optional<std::int64_t> max;
  bool allow_dash = false;
};

struct ParamSpec {
  std::string name;
  ValueRule rule;
  ValueRule item_rule;  // for arrays
  bool required = false;
  std::optional<OrderedJson> default_value;
};

struct OptionalGroup {
  std::string param;
  std::vector<std::string> args;
};

inline constexpr Duration kDefaultRetryBackoff{10'000};
inline constexpr Duration kMaxRetryBackoff{600'000};

struct RenderContext {
  std::string run_id;
  std::string output_dir;  // absolute
  int attempt = 1;
  bool resume = false;
  // `{model_url:NAME}` of every model the template names, and `{model_key}`:
  // set when the instance has models (SPEC §13).
  std::map<std::string, std::string> model_urls = {};
  std::string model_key = {};
};

// `${NAME}` → NAME: an env value that refers to the instance's environment,
// resolved at each attempt so that the value never reaches a checkpoint.
std::optional<std::string> env_reference(const std::string& value);

class ChildTemplate {
 public:
  // Throws ConfigError naming the key (under `where`, e.g. `child` or
  // `children.agentv`) that is wrong.
  static ChildTemplate parse(const OrderedJson& child,
                             const std::string& name = std::string(checkpoint::kDefaultTemplate),
                             const std::string& where = "child");
  // The built-in template: inflight-demo-eval with `tests` and `test_ms`.
  static ChildTemplate demo(const std::string& demo_binary);

  // nullopt when the request is acceptable, else the first param at fault.
  std::optional<ParamError> validate(const OrderedJson& request) const;
  // Adds a `KEY=VALUE` word to `request`, the value typed as KEY is declared;
  // an array param takes one item per word. ParamError for an undeclared
  // param or a value not of its type; validate() judges the rest.
  std::optional<ParamError> add_param_word(OrderedJson& request, std::string_view word) const;
  std::vector<std::string> render(const OrderedJson& request, const RenderContext& context) const;
  // `env` with {run_id}, {output_dir} and {attempt} filled in; `${NAME}`
  // references are left for the caller to resolve.
  std::vector<std::pair<std::string, std::string>> render_env(const RenderContext& context) const;
  // Exit codes by which the child asks to be run again later.
  const std::vector<int>& retry_exit_codes() const { return retry_exit_codes_; }
  // How long to wait before the attempt after `deferrals` deferred ones in a
  // row (1-based): retry_backoff, doubled each time, at most kMaxRetryBackoff.
  Duration retry_delay(int deferrals) const;

  const std::string& name() const { return name_; }
  // A fingerprint of the template as configured, recorded with every run so
  // that a changed template is noticed (and logged) when the run resumes.
  const std::string& digest() const { return digest_; }
  const OrderedJson& source() const { return source_; }
  // Every program an attempt may start: argv[0], and resume.argv[0] when the
  // resume command is another one.
  std::vector<std::string> programs() const;
  const std::string& cwd() const { return cwd_; }
  const std::vector<std::pair<std::string, std::string>>& env() const { return env_; }
  // Variables of serve's environment this template's children also get.
  const std::vector<std::string>& inherit_env() const { return inherit_env_; }
  const std::string& progress_file() const { return progress_file_; }
  // How many records the progress file holds once the run is done
  // (`progress_total`: a number, or `{param}` of an integer param), when the
  // template says.
  std::optional<std::uint64_t> progress_total(const OrderedJson& request) const;
  // What the child's process group gets at a stop and at shutdown.
  int stop_signal() const { return stop_signal_; }
  // The models its `{model_url:NAME}` placeholders name: the only ones its
  // children may reach.
  const std::set<std::string>& models() const { return models_; }

 private:
  const ParamSpec* find_param(const std::string& name) const;
  bool always_present(const std::string& name) const;
  bool names_model(const std::string& placeholder, const std::string& where);
  void check_consistency();
  void check_progress_file() const;
  void check_env();
  void parse_resume(const OrderedJson& child);
  void parse_retry(const OrderedJson& child);
  void parse_inherit_env(const OrderedJson& child);
  void parse_progress_total(const OrderedJson& value);
  void check_placeholders(const std::vector<std::string>& args, const std::string& where,
                          const std::string& group_param);
  OrderedJson with_defaults(const OrderedJson& request) const;

  std::string name_;
  std::string digest_;
  std::string where_;
  OrderedJson source_;
  std::vector<std::string> argv_;
  std::vector<OptionalGroup> optional_;
  std::vector<std::string> resume_argv_;
  bool resume_replaces_ = false;  // `resume.argv`: the whole argv of a resumed attempt
  std::vector<int> retry_exit_codes_;
  Duration retry_backoff_ = kDefaultRetryBackoff;
  std::string cwd_ = ".";
  std::vector<std::pair<std::string, std::string>> env_;
  std::vector<std::string> inherit_env_;
  std::vector<ParamSpec> params_;
  std::string progress_file_;
  std::optional<std::uint64_t> progress_total_;
  std::string progress_total_param_;  // set when the total is a param's value
  int stop_signal_ = SIGTERM;
  std::set<std::string> models_;
};

}  // namespace inflight
