#include "inflight/core/child_templates.hpp"

#include <unistd.h>

#include <regex>

#include "inflight/core/branch_name.hpp"
#include "inflight/core/model_specs.hpp"
#include "inflight/core/program_path.hpp"

namespace inflight {

namespace fs = std::filesystem;

ChildTemplates ChildTemplates::from_config(const OrderedJson& file, const fs::path& demo_binary) {
  ChildTemplates t;
  const std::string default_name(checkpoint::kDefaultTemplate);
  if (file.contains("child"))
    t.templates_.emplace(default_name, ChildTemplate::parse(file["child"], default_name, "child"));
  if (file.contains("children")) {
    const auto& children = file["children"];
    if (!children.is_object() || children.empty())
      throw ConfigError("children", "must be an object of named templates");
    for (const auto& [name, child] : children.items()) {
      const auto where = "children." + name;
      if (!checkpoint::is_valid_run_id(name))
        throw ConfigError(where,
                          "a template name must match " + std::string(checkpoint::kRunIdPattern));
      if (t.templates_.count(name))
        throw ConfigError(where, "is also given as `child`, the template named " + default_name);
      t.templates_.emplace(name, ChildTemplate::parse(child, name, where));
    }
  }
  if (t.templates_.empty()) {
    t.templates_.emplace(default_name, ChildTemplate::demo(demo_binary.string()));
    t.built_in_only_ = true;
  }
  return t;
}

// A template naming a model the config lacks is refused at start (SPEC §13).
// Nor may a child be handed a model's key by `${NAME}` or `inherit_env`.
void ChildTemplates::check_models(const ModelSpecs& models) const {
  std::set<std::string> keys;
  for (const auto& [name, model] : models)
    if (!model.api_key_env.empty()) keys.insert(model.api_key_env);
  for (const auto& [name, child] : templates_) {
    const auto where =
        name == checkpoint::kDefaultTemplate ? std::string("child") : "children." + name;
    for (const auto& model : child.models())
      if (!models.count(model))
        throw ConfigError(where,
                          "{model_url:" + model + "} names a model the config's `models` lacks");
    for (const auto& variable : child.inherit_env())
      if (keys.count(variable))
        throw ConfigError(where + ".inherit_env",
                          variable + " holds a model's key, which children never get");
    for (const auto& [var, value] : child.env())
      if (auto reference = env_reference(value); reference && keys.count(*reference))
        throw ConfigError(where + ".env." + var,
                          *reference + " holds a model's key, which children never get");
  }
}

const ChildTemplate* ChildTemplates::find(const std::string& name) const {
  const auto it = templates_.find(name);
  return it == templates_.end() ? nullptr : &it->second;
}

RunVerdict ChildTemplates::judge(const checkpoint::RunParams& params) const {
  const auto* child = find(params.child_name);
  if (!child)
    return {.refusal = "this instance has no child template named '" + params.child_name +
                       "' (it has: " + names() + ")",
            .progress_file = ""};
  if (auto problem = child->validate(params.request))
    return {.refusal = "the run's request no longer validates against template '" +
                       params.child_name + "': " + problem->param + ": " + problem->message,
            .progress_file = ""};
  return {.refusal = std::nullopt,
          .progress_file = child->progress_file(),
          .progress_total = child->progress_total(params.request)};
}

void ChildTemplates::check_programs() const {
  for (const auto& [name, child] : templates_) {
    const auto where =
        name == checkpoint::kDefaultTemplate ? std::string("child") : "children." + name;
    const auto programs = child.programs();
    for (std::size_t i = 0; i < programs.size(); ++i)
      if (auto problem = program_problem(programs[i], fs::absolute(child.cwd())))
        throw ConfigError(where + (i == 0 ? ".argv" : ".resume.argv"), *problem);
  }
}

OrderedJson ChildTemplates::sources() const {
  OrderedJson all = OrderedJson::object();
  for (const auto& [name, child] : templates_) all[name] = child.source();
  return all;
}

std::string ChildTemplates::names() const {
  std::string out;
  for (const auto& [name, child] : templates_) out += (out.empty() ? "" : ", ") + name;
  return out;
}

std::set<std::string> ChildTemplates::referenced_variables() const {
  std::set<std::string> names;
  for (const auto& [name, child] : templates_) {
    for (const auto& [var, value] : child.env())
      if (auto reference = env_reference(value)) names.insert(*reference);
    names.insert(child.inherit_env().begin(), child.inherit_env().end());
  }
  return names;
}

}  // namespace inflight
