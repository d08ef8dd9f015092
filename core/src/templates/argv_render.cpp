#include <algorithm>

#include "inflight/core/child_template.hpp"
#include "param_rules.hpp"
#include "placeholders.hpp"

namespace inflight {

namespace {

std::string scalar_text(const OrderedJson& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

}  // namespace

std::optional<ParamError> ChildTemplate::validate(const OrderedJson& request) const {
  if (!request.is_object()) return ParamError{"", "the request body must be a JSON object"};
  for (const auto& [name, value] : request.items()) {
    const auto* param = find_param(name);
    if (!param) return ParamError{name, "is not a declared param"};
    if (auto problem = check_value(*param, value)) return ParamError{name, *problem};
  }
  for (const auto& p : params_)
    if (p.required && !request.contains(p.name) && !p.default_value)
      return ParamError{p.name, "is required"};
  return std::nullopt;
}

OrderedJson ChildTemplate::with_defaults(const OrderedJson& request) const {
  OrderedJson full = request;
  for (const auto& p : params_)
    if (!full.contains(p.name) && p.default_value) full[p.name] = *p.default_value;
  return full;
}

std::vector<std::string> ChildTemplate::render(const OrderedJson& request,
                                               const RenderContext& context) const {
  const auto values = with_defaults(request);
  auto lookup_with = [&](const std::string& element_param, const OrderedJson* element) {
    return [&, element_param, element](const std::string& name) -> std::string {
      if (name == "run_id") return context.run_id;
      if (name == "output_dir") return context.output_dir;
      if (name == "attempt") return std::to_string(context.attempt);
      if (auto model = model_url_name(name)) return context.model_urls.at(*model);
      if (element && name == element_param) return scalar_text(*element);
      return scalar_text(values.at(name));
    };
  };
  std::vector<std::string> argv;
  const auto plain = lookup_with("", nullptr);
  if (context.resume && resume_replaces_) {
    for (const auto& arg : resume_argv_) argv.push_back(substitute(arg, plain));
    return argv;
  }
  for (const auto& arg : argv_) argv.push_back(substitute(arg, plain));
  for (const auto& group : optional_) {
    if (!values.contains(group.param)) continue;
    const auto& value = values[group.param];
    const auto elements = value.is_array() ? value : OrderedJson::array({value});
    for (const auto& element : elements)
      for (const auto& arg : group.args)
        argv.push_back(substitute(arg, lookup_with(group.param, &element)));
  }
  if (context.resume)
    for (const auto& arg : resume_argv_) argv.push_back(substitute(arg, plain));
  return argv;
}

std::vector<std::pair<std::string, std::string>> ChildTemplate::render_env(
    const RenderContext& context) const {
  const auto builtin = [&](const std::string& name) -> std::string {
    if (name == "run_id") return context.run_id;
    if (name == "output_dir") return context.output_dir;
    if (name == kModelKey) return context.model_key;
    if (auto model = model_url_name(name)) return context.model_urls.at(*model);
    return std::to_string(context.attempt);  // the only other one check_env allows
  };
  auto env = env_;
  for (auto& [name, value] : env)
    if (!env_reference(value)) value = substitute(value, builtin);
  return env;
}

}  // namespace inflight
