#include "inflight/core/child_template.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "inflight/core/duration.hpp"
#include "inflight/core/fnv1a.hpp"
#include "inflight/core/model_specs.hpp"
#include "inflight/core/stop_signal.hpp"
#include "param_rules.hpp"
#include "placeholders.hpp"

namespace inflight {

namespace {

void require_known_keys(const OrderedJson& object, const std::string& where,
                        const std::set<std::string>& known) {
  if (!object.is_object()) throw ConfigError(where, "must be an object");
  for (const auto& [key, value] : object.items())
    if (!known.count(key)) throw ConfigError(where + "." + key, "unknown key");
}

std::vector<std::string> string_array(const OrderedJson& value, const std::string& where) {
  if (!value.is_array()) throw ConfigError(where, "must be an array of strings");
  std::vector<std::string> out;
  for (const auto& item : value) {
    if (!item.is_string()) throw ConfigError(where, "must be an array of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

// A pattern is compiled by std::regex, whose parser recurses per group.
constexpr std::size_t kMaxPatternLength = 1024;

std::string string_field(const OrderedJson& value, const std::string& where) {
  if (!value.is_string()) throw ConfigError(where, "must be a string");
  return value.get<std::string>();
}

std::int64_t integer_field(const OrderedJson& value, const std::string& where) {
  if (!value.is_number_integer()) throw ConfigError(where, "must be an integer");
  return value.get<std::int64_t>();
}

ParamType parse_type(const OrderedJson& value, const std::string& where, bool item) {
  const auto name = string_field(value, where);
  if (name == "string") return ParamType::string;
  if (name == "integer") return ParamType::integer;
  if (name == "array" && !item) return ParamType::array;
  throw ConfigError(
      where, "must be " + std::string(item ? "string or integer" : "string, integer or array"));
}

ValueRule parse_rule(const OrderedJson& spec, const std::string& where, bool item) {
  ValueRule rule;
  if (!spec.contains("type")) throw ConfigError(where + ".type", "is required");
  rule.type = parse_type(spec["type"], where + ".type", item);
  if (spec.contains("pattern")) {
    const auto text = string_field(spec["pattern"], where + ".pattern");
    if (text.size() > kMaxPatternLength)
      throw ConfigError(where + ".pattern",
                        "is longer than " + std::to_string(kMaxPatternLength) + " characters");
    try {
      rule.pattern.emplace(text, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw ConfigError(where + ".pattern", std::string("invalid regular expression: ") + e.what());
    }
  }
  if (spec.contains("min")) rule.min = integer_field(spec["min"], where + ".min");
  if (spec.contains("max")) rule.max = integer_field(spec["max"], where + ".max");
  if (spec.contains("allow_dash")) {
    if (!spec["allow_dash"].is_boolean())
      throw ConfigError(where + ".allow_dash", "must be a boolean");
    rule.allow_dash = spec["allow_dash"].get<bool>();
  }
  return rule;
}

bool is_variable_name(const std::string& name) {
  static const std::regex kVariable("^[A-Za-z_][A-Za-z0-9_]*$");
  return std::regex_match(name, kVariable);
}

bool is_param_name(const std::string& name) {
  static const std::regex kName("^[A-Za-z_][A-Za-z0-9_]{0,63}$");
  return std::regex_match(name, kName);
}

ParamSpec parse_param(const std::string& name, const OrderedJson& spec, const std::string& where) {
  require_known_keys(
      spec, where, {"type", "required", "pattern", "min", "max", "allow_dash", "default", "items"});
  if (!is_param_name(name) || name == "id" || name == "child" ||
      std::count(kBuiltinPlaceholders.begin(), kBuiltinPlaceholders.end(), name))
    throw ConfigError(where, "is not a usable param name");
  ParamSpec param;
  param.name = name;
  param.rule = parse_rule(spec, where, false);
  if (spec.contains("required")) {
    if (!spec["required"].is_boolean()) throw ConfigError(where + ".required", "must be a boolean");
    param.required = spec["required"].get<bool>();
  }
  if (param.rule.type == ParamType::array) {
    if (!spec.contains("items")) throw ConfigError(where + ".items", "is required for an array");
    require_known_keys(spec["items"], where + ".items",
                       {"type", "pattern", "min", "max", "allow_dash"});
    param.item_rule = parse_rule(spec["items"], where + ".items", true);
  } else if (spec.contains("items")) {
    throw ConfigError(where + ".items", "is only for arrays");
  }
  if (spec.contains("default")) param.default_value = spec["default"];
  return param;
}

std::string digest_of(const OrderedJson& source) {
  Fnv1a hash;
  hash.mix(nlohmann::json(source).dump());  // sorted keys: key order does not count
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash.value()));
  return std::string("fnv1a64:") + hex;
}

}  // namespace

std::optional<std::string> env_reference(const std::string& value) {
  if (value.size() < 3 || !value.starts_with("${") || value.back() != '}') return std::nullopt;
  return value.substr(2, value.size() - 3);
}

const ParamSpec* ChildTemplate::find_param(const std::string& name) const {
  for (const auto& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

namespace {

int parse_stop_signal(const OrderedJson& value, const std::string& where) {
  const auto name = string_field(value, where + ".stop_signal");
  if (const auto signal = stop_signal_named(name)) return *signal;
  throw ConfigError(where + ".stop_signal",
                    "'" + name + "' is not SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 or SIGUSR2");
}

}  // namespace

ChildTemplate ChildTemplate::parse(const OrderedJson& child, const std::string& name,
                                   const std::string& where) {
  require_known_keys(
      child, where,
      {"argv", "optional", "resume_argv", "resume", "cwd", "env", "params", "progress_file",
       "retry_exit_codes", "retry_backoff", "stop_signal", "inherit_env", "progress_total"});
  ChildTemplate t;
  t.name_ = name;
  t.where_ = where;
  t.source_ = child;
  t.digest_ = digest_of(child);
  if (!child.contains("argv")) throw ConfigError(where + ".argv", "is required");
  t.argv_ = string_array(child["argv"], where + ".argv");
  if (t.argv_.empty() || t.argv_.front().empty())
    throw ConfigError(where + ".argv", "must name a program");
  const auto params = child.value("params", OrderedJson::object());
  if (!params.is_object()) throw ConfigError(where + ".params", "must be an object");
  for (const auto& [param, spec] : params.items())
    t.params_.push_back(parse_param(param, spec, where + ".params." + param));
  if (child.contains("optional")) {
    if (!child["optional"].is_object()) throw ConfigError(where + ".optional", "must be an object");
    for (const auto& [param, args] : child["optional"].items())
      t.optional_.push_back({param, string_array(args, where + ".optional." + param)});
  }
  t.parse_resume(child);
  t.parse_retry(child);
  if (child.contains("cwd")) t.cwd_ = string_field(child["cwd"], where + ".cwd");
  if (child.contains("env")) {
    if (!child["env"].is_object()) throw ConfigError(where + ".env", "must be an object");
    for (const auto& [var, value] : child["env"].items())
      t.env_.emplace_back(var, string_field(value, where + ".env." + var));
  }
  t.parse_inherit_env(child);
  if (child.contains("progress_file"))
    t.progress_file_ = string_field(child["progress_file"], where + ".progress_file");
  if (child.contains("stop_signal"))
    t.stop_signal_ = parse_stop_signal(child["stop_signal"], where);
  if (child.contains("progress_total")) t.parse_progress_total(child["progress_total"]);
  t.check_consistency();
  return t;
}

// A whole number, or `{param}` of an integer param that always has a value.
void ChildTemplate::parse_progress_total(const OrderedJson& value) {
  const auto key = where_ + ".progress_total";
  if (value.is_number_unsigned()) {
    progress_total_ = value.get<std::uint64_t>();
    return;
  }
  const auto text = value.is_string() ? value.get<std::string>() : "";
  const auto names = placeholder_names(text);
  const auto* param =
      names.size() == 1 && text == "{" + names[0] + "}" ? find_param(names[0]) : nullptr;
  if (!param || param->rule.type != ParamType::integer || !always_present(param->name))
    throw ConfigError(key,
                      "must be a whole number or \"{param}\" of an integer param that is "
                      "required or has a default");
  progress_total_param_ = param->name;
}

std::optional<std::uint64_t> ChildTemplate::progress_total(const OrderedJson& request) const {
  if (progress_total_param_.empty()) return progress_total_;
  const auto values = with_defaults(request);
  const auto it = values.find(progress_total_param_);
  if (it == values.end() || !it->is_number_integer() || it->get<std::int64_t>() < 0)
    return std::nullopt;
  return it->get<std::uint64_t>();
}

// `resume_argv` is appended to the argv of a resumed attempt; `resume.argv`
// replaces it, for tools whose resume is another command.
void ChildTemplate::parse_resume(const OrderedJson& child) {
  if (child.contains("resume_argv") && child.contains("resume"))
    throw ConfigError(where_ + ".resume", "cannot be given with resume_argv");
  if (child.contains("resume_argv"))
    resume_argv_ = string_array(child["resume_argv"], where_ + ".resume_argv");
  if (!child.contains("resume")) return;
  require_known_keys(child["resume"], where_ + ".resume", {"argv"});
  if (!child["resume"].contains("argv")) throw ConfigError(where_ + ".resume.argv", "is required");
  resume_argv_ = string_array(child["resume"]["argv"], where_ + ".resume.argv");
  if (resume_argv_.empty() || resume_argv_.front().empty())
    throw ConfigError(where_ + ".resume.argv", "must name a program");
  resume_replaces_ = true;
}

// Exit codes by which a child says "run me again later" (rate limited,
// preempted): such an attempt is deferred, not failed.
void ChildTemplate::parse_retry(const OrderedJson& child) {
  if (child.contains("retry_exit_codes")) {
    const auto where = where_ + ".retry_exit_codes";
    const auto& codes = child["retry_exit_codes"];
    if (!codes.is_array() || codes.size() > 255)
      throw ConfigError(where, "must be an array of at most 255 exit codes");
    for (const auto& code : codes) {
      if (!code.is_number_integer() || code.get<std::int64_t>() < 1 ||
          code.get<std::int64_t>() > 255)
        throw ConfigError(where, "must hold exit codes from 1 to 255");
      retry_exit_codes_.push_back(code.get<int>());
    }
  }
  if (!child.contains("retry_backoff")) return;
  const auto where = where_ + ".retry_backoff";
  const auto backoff = parse_duration(string_field(child["retry_backoff"], where));
  if (!backoff) throw ConfigError(where, "must be a duration such as 10s or 2m");
  retry_backoff_ = *backoff;
}

// Children get a small base of serve's environment (child_environment.hpp);
// anything more is named here, never inherited by default.
void ChildTemplate::parse_inherit_env(const OrderedJson& child) {
  if (!child.contains("inherit_env")) return;
  const auto where = where_ + ".inherit_env";
  for (const auto& name : string_array(child["inherit_env"], where)) {
    if (!is_variable_name(name))
      throw ConfigError(where, "'" + name + "' is not an environment variable name");
    if (name.starts_with("INFLIGHT_"))
      throw ConfigError(where, name +
                                   ": INFLIGHT_* variables hold inflight's own settings and "
                                   "secrets and never reach a child");
    inherit_env_.push_back(name);
  }
}

std::vector<std::string> ChildTemplate::programs() const {
  if (resume_replaces_ && resume_argv_.front() != argv_.front())
    return {argv_.front(), resume_argv_.front()};
  return {argv_.front()};
}

Duration ChildTemplate::retry_delay(int deferrals) const {
  auto delay = retry_backoff_;
  for (int i = 1; i < deferrals && delay < kMaxRetryBackoff; ++i) delay *= 2;
  return std::min(delay, std::max(retry_backoff_, kMaxRetryBackoff));
}

// The progress file is read and repaired in place: it must stay inside the
// run dir whatever the run dir holds.
void ChildTemplate::check_progress_file() const {
  if (progress_file_.empty()) return;
  const std::filesystem::path path(progress_file_);
  bool inside = path.is_relative() && !path.filename().empty();
  for (const auto& part : path) inside = inside && part != ".." && part != "." && !part.empty();
  if (!inside)
    throw ConfigError(where_ + ".progress_file",
                      "must be a relative path inside the run dir, without '.' or '..'");
}

// `${NAME}` values are resolved from the instance's environment at each
// attempt; inflight's own settings (INFLIGHT_*) hold its secrets.
void ChildTemplate::check_env() {
  for (const auto& [var, value] : env_) {
    const auto where = where_ + ".env." + var;
    if (!is_variable_name(var)) throw ConfigError(where, "is not an environment variable name");
    const auto reference = env_reference(value);
    if (reference && reference->starts_with("INFLIGHT_"))
      throw ConfigError(where, "must not refer to " + *reference +
                                   ": INFLIGHT_* variables hold "
                                   "inflight's own settings and secrets");
    if (reference) continue;
    // Only what inflight itself decides: a param in the environment would
    // reach every process the child starts.
    for (const auto& name : placeholder_names(value))
      if (!std::count(kBuiltinPlaceholders.begin(), kBuiltinPlaceholders.end(), name) &&
          name != kModelKey && !names_model(name, where))
        throw ConfigError(where, "{" + name +
                                     "} is not one of {run_id}, {output_dir}, {attempt}, "
                                     "{model_url:NAME}, {model_key}");
  }
}

// Records the model a `{model_url:NAME}` names; whether the config has it is
// ChildTemplates' to judge, which sees the `models`.
bool ChildTemplate::names_model(const std::string& placeholder, const std::string& where) {
  const auto model = model_url_name(placeholder);
  if (!model) return false;
  if (!is_model_name(*model)) throw ConfigError(where, "{" + placeholder + "} names no model");
  models_.insert(*model);
  return true;
}

bool ChildTemplate::always_present(const std::string& name) const {
  const auto* p = find_param(name);
  return p && p->rule.type != ParamType::array && (p->required || p->default_value);
}

void ChildTemplate::check_placeholders(const std::vector<std::string>& args,
                                       const std::string& where, const std::string& group_param) {
  for (const auto& arg : args) {
    for (const auto& name : placeholder_names(arg)) {
      const bool builtin =
          std::count(kBuiltinPlaceholders.begin(), kBuiltinPlaceholders.end(), name);
      if (builtin || name == group_param || always_present(name) || names_model(name, where))
        continue;
      if (name == kModelKey)
        throw ConfigError(where,
                          "{model_key} is for env only: argv is readable by every process "
                          "in /proc");
      throw ConfigError(where, find_param(name)
                                   ? "{" + name + "} may be absent; use it in its optional group"
                                   : "{" + name + "} is not a declared param");
    }
  }
}

void ChildTemplate::check_consistency() {
  for (const auto& p : params_) {
    if (!p.default_value) continue;
    if (auto problem = check_value(p, *p.default_value))
      throw ConfigError(where_ + ".params." + p.name + ".default", *problem);
  }
  check_placeholders(argv_, where_ + ".argv", "");
  check_placeholders(resume_argv_, where_ + (resume_replaces_ ? ".resume.argv" : ".resume_argv"),
                     "");
  for (const auto& group : optional_) {
    if (!find_param(group.param))
      throw ConfigError(where_ + ".optional." + group.param, "is not a declared param");
    check_placeholders(group.args, where_ + ".optional." + group.param, group.param);
  }
  check_progress_file();
  check_env();
}

ChildTemplate ChildTemplate::demo(const std::string& demo_binary) {
  return parse(OrderedJson{
      {"argv",
       {demo_binary, "--output", "{output_dir}", "--tests", "{tests}", "--test-ms", "{test_ms}"}},
      {"resume_argv", {"--resume"}},
      {"params",
       {{"tests", {{"type", "integer"}, {"min", 0}, {"max", 99999}, {"default", 20}}},
        {"test_ms", {{"type", "integer"}, {"min", 0}, {"max", 86400000}, {"default", 500}}}}},
      {"progress_file", "index.jsonl"},
      {"progress_total", "{tests}"}});
}

}  // namespace inflight
