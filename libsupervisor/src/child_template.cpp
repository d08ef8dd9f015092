#include "inflight/supervisor/child_template.hpp"

#include <algorithm>
#include <set>

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

bool is_param_name(const std::string& name) {
  static const std::regex kName("^[A-Za-z_][A-Za-z0-9_]{0,63}$");
  return std::regex_match(name, kName);
}

ParamSpec parse_param(const std::string& name, const OrderedJson& spec, const std::string& where) {
  require_known_keys(
      spec, where, {"type", "required", "pattern", "min", "max", "allow_dash", "default", "items"});
  if (!is_param_name(name) || name == "id" ||
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

}  // namespace

const ParamSpec* ChildTemplate::find_param(const std::string& name) const {
  for (const auto& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

ChildTemplate ChildTemplate::parse(const OrderedJson& child) {
  require_known_keys(child, "child",
                     {"argv", "optional", "resume_argv", "cwd", "env", "params", "progress_file"});
  ChildTemplate t;
  t.source_ = child;
  if (!child.contains("argv")) throw ConfigError("child.argv", "is required");
  t.argv_ = string_array(child["argv"], "child.argv");
  if (t.argv_.empty() || t.argv_.front().empty())
    throw ConfigError("child.argv", "must name a program");
  const auto params = child.value("params", OrderedJson::object());
  if (!params.is_object()) throw ConfigError("child.params", "must be an object");
  for (const auto& [name, spec] : params.items())
    t.params_.push_back(parse_param(name, spec, "child.params." + name));
  if (child.contains("optional")) {
    if (!child["optional"].is_object()) throw ConfigError("child.optional", "must be an object");
    for (const auto& [name, args] : child["optional"].items())
      t.optional_.push_back({name, string_array(args, "child.optional." + name)});
  }
  if (child.contains("resume_argv"))
    t.resume_argv_ = string_array(child["resume_argv"], "child.resume_argv");
  if (child.contains("cwd")) t.cwd_ = string_field(child["cwd"], "child.cwd");
  if (child.contains("env")) {
    if (!child["env"].is_object()) throw ConfigError("child.env", "must be an object");
    for (const auto& [name, value] : child["env"].items())
      t.env_.emplace_back(name, string_field(value, "child.env." + name));
  }
  if (child.contains("progress_file"))
    t.progress_file_ = string_field(child["progress_file"], "child.progress_file");
  t.check_consistency();
  return t;
}

bool ChildTemplate::always_present(const std::string& name) const {
  const auto* p = find_param(name);
  return p && p->rule.type != ParamType::array && (p->required || p->default_value);
}

void ChildTemplate::check_placeholders(const std::vector<std::string>& args,
                                       const std::string& where,
                                       const std::string& group_param) const {
  for (const auto& arg : args) {
    for (const auto& name : placeholder_names(arg)) {
      const bool builtin =
          std::count(kBuiltinPlaceholders.begin(), kBuiltinPlaceholders.end(), name);
      if (builtin || name == group_param || always_present(name)) continue;
      throw ConfigError(where, find_param(name)
                                   ? "{" + name + "} may be absent; use it in its optional group"
                                   : "{" + name + "} is not a declared param");
    }
  }
}

void ChildTemplate::check_consistency() const {
  for (const auto& p : params_) {
    if (!p.default_value) continue;
    if (auto problem = check_value(p, *p.default_value))
      throw ConfigError("child.params." + p.name + ".default", *problem);
  }
  check_placeholders(argv_, "child.argv", "");
  check_placeholders(resume_argv_, "child.resume_argv", "");
  for (const auto& group : optional_) {
    if (!find_param(group.param))
      throw ConfigError("child.optional." + group.param, "is not a declared param");
    check_placeholders(group.args, "child.optional." + group.param, group.param);
  }
}

ChildTemplate ChildTemplate::demo(const std::string& demo_binary) {
  return parse(OrderedJson{
      {"argv",
       {demo_binary, "--output", "{output_dir}", "--tests", "{tests}", "--test-ms", "{test_ms}"}},
      {"resume_argv", {"--resume"}},
      {"params",
       {{"tests", {{"type", "integer"}, {"min", 0}, {"max", 99999}, {"default", 20}}},
        {"test_ms", {{"type", "integer"}, {"min", 0}, {"max", 86400000}, {"default", 500}}}}},
      {"progress_file", "index.jsonl"}});
}

}  // namespace inflight
