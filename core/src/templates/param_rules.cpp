#include "param_rules.hpp"

namespace inflight {

namespace {

// Bounds the work a hostile value can cause in a pattern match.
constexpr std::size_t kMaxStringLength = 4096;

std::optional<std::string> check_string(const ValueRule& rule, const OrderedJson& value) {
  if (!value.is_string()) return "must be a string";
  const auto& text = value.get_ref<const std::string&>();
  if (text.size() > kMaxStringLength)
    return "is longer than " + std::to_string(kMaxStringLength) + " characters";
  if (text.find('\0') != std::string::npos) return "must not contain a NUL character";
  if (!rule.allow_dash && !text.empty() && text.front() == '-')
    return "must not begin with '-' (it would be read as an option)";
  if (rule.pattern && !std::regex_search(text, *rule.pattern))
    return "does not match the param's pattern";
  return std::nullopt;
}

std::optional<std::string> check_integer(const ValueRule& rule, const OrderedJson& value) {
  if (!value.is_number_integer()) return "must be an integer";
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > INT64_MAX)
    return "is out of range";
  const auto n = value.get<std::int64_t>();
  if (rule.min && n < *rule.min) return "must be at least " + std::to_string(*rule.min);
  if (rule.max && n > *rule.max) return "must be at most " + std::to_string(*rule.max);
  return std::nullopt;
}

std::optional<std::string> check_scalar(const ValueRule& rule, const OrderedJson& value) {
  return rule.type == ParamType::integer ? check_integer(rule, value) : check_string(rule, value);
}

}  // namespace

std::optional<std::string> check_value(const ParamSpec& param, const OrderedJson& value) {
  if (param.rule.type != ParamType::array) return check_scalar(param.rule, value);
  if (!value.is_array()) return "must be an array";
  for (std::size_t i = 0; i < value.size(); ++i)
    if (auto problem = check_scalar(param.item_rule, value[i]))
      return "item " + std::to_string(i) + " " + *problem;
  return std::nullopt;
}

}  // namespace inflight
