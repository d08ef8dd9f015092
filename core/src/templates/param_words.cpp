// `KEY=VALUE` words (`inflight run --param`) as a request: the command line
// has no JSON types, so each value takes the type its param declares.
#include <charconv>

#include "inflight/core/child_template.hpp"

namespace inflight {

std::optional<ParamError> ChildTemplate::add_param_word(OrderedJson& request,
                                                        std::string_view word) const {
  const auto equals = word.find('=');
  if (equals == std::string_view::npos || equals == 0)
    return ParamError{std::string(word), "is not KEY=VALUE"};
  const std::string name(word.substr(0, equals));
  const std::string text(word.substr(equals + 1));
  const auto* param = find_param(name);
  if (!param) return ParamError{name, "is not a declared param of template '" + name_ + "'"};
  const bool array = param->rule.type == ParamType::array;
  OrderedJson value = text;
  if ((array ? param->item_rule : param->rule).type == ParamType::integer) {
    std::int64_t number = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
    if (error != std::errc{} || end != text.data() + text.size())
      return ParamError{name, "'" + text + "' is not an integer"};
    value = number;
  }
  if (array) {
    request[name].push_back(std::move(value));
  } else if (request.contains(name)) {
    return ParamError{name, "is given twice (only an array param repeats)"};
  } else {
    request[name] = std::move(value);
  }
  return std::nullopt;
}

}  // namespace inflight
