#include "inflight/core/run_params.hpp"

#include <climits>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "inflight/core/bounded_json.hpp"
#include "inflight/core/branch_name.hpp"
#include "inflight/core/run_dir.hpp"

namespace inflight::checkpoint {

namespace {

// Timestamps, pod names, outcomes: short by nature.
constexpr std::size_t kMaxShortString = 256;

[[noreturn]] void malformed(const std::string& field, const std::string& problem) {
  throw std::runtime_error("run-params.json: " + field + " " + problem);
}

template <typename T>
OrderedJson optional_json(const std::optional<T>& value) {
  return value ? OrderedJson(*value) : OrderedJson(nullptr);
}

std::string short_string(const OrderedJson& json, const char* key) {
  auto text = json.at(key).get<std::string>();
  if (text.size() > kMaxShortString)
    malformed(key, "is longer than " + std::to_string(kMaxShortString) + " bytes");
  return text;
}

// A JSON integer within int's range. Anything else is refused, never converted: nlohmann casts a
// float to int as it is, and one beyond int's range is undefined behaviour (the fuzz target
// found a version of 7.8e42).
int int_field(const OrderedJson& value, const char* key) {
  if (value.is_number_unsigned() && value.get<std::uint64_t>() <= INT_MAX)
    return static_cast<int>(value.get<std::uint64_t>());
  if (value.is_number_integer() && !value.is_number_unsigned() &&
      value.get<std::int64_t>() >= INT_MIN && value.get<std::int64_t>() <= INT_MAX)
    return static_cast<int>(value.get<std::int64_t>());
  malformed(key, "is not a whole number from " + std::to_string(INT_MIN) + " to " +
                     std::to_string(INT_MAX));
}

template <typename T>
std::optional<T> optional_field(const OrderedJson& json, const char* key) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null()) return std::nullopt;
  if constexpr (std::is_same_v<T, std::string>)
    return short_string(json, key);
  else
    return int_field(*it, key);
}

OrderedJson attempt_to_json(const AttemptRecord& a) {
  OrderedJson json{{"attempt", a.attempt},
                   {"pod", a.pod},
                   {"started_at", a.started_at},
                   {"ended_at", optional_json(a.ended_at)},
                   {"exit_code", optional_json(a.exit_code)},
                   {"signal", optional_json(a.signal)},
                   {"outcome", optional_json(a.outcome)}};
  if (a.error) json["error"] = *a.error;
  if (a.model) json["model"] = to_json(*a.model);
  return json;
}

std::optional<std::string> attempt_error(const OrderedJson& json) {
  const auto it = json.find("error");
  if (it == json.end() || it->is_null()) return std::nullopt;
  auto text = it->get<std::string>();
  if (text.size() > kMaxAttemptErrorBytes)
    malformed("error", "is longer than " + std::to_string(kMaxAttemptErrorBytes) + " bytes");
  return text;
}

constexpr const char* kModelCountFields[] = {
    "calls",         "replayed",           "input_tokens",
    "output_tokens", "saved_input_tokens", "saved_output_tokens"};

std::uint64_t* model_count_field(ModelCounts& counts, std::string_view name) {
  std::uint64_t* fields[] = {
      &counts.calls,         &counts.replayed,           &counts.input_tokens,
      &counts.output_tokens, &counts.saved_input_tokens, &counts.saved_output_tokens};
  for (std::size_t i = 0; i < std::size(fields); ++i)
    if (name == kModelCountFields[i]) return fields[i];
  return nullptr;
}

}  // namespace

ModelCounts& ModelCounts::operator+=(const ModelCounts& other) {
  calls += other.calls;
  replayed += other.replayed;
  input_tokens += other.input_tokens;
  output_tokens += other.output_tokens;
  saved_input_tokens += other.saved_input_tokens;
  saved_output_tokens += other.saved_output_tokens;
  return *this;
}

OrderedJson to_json(const ModelCounts& counts) {
  OrderedJson json = OrderedJson::object();
  auto copy = counts;
  for (const auto* name : kModelCountFields) json[name] = *model_count_field(copy, name);
  return json;
}

ModelCounts model_counts_from_json(const OrderedJson& json) {
  ModelCounts counts;
  if (!json.is_object()) malformed("model", "is not an object");
  for (const auto* name : kModelCountFields) {
    const auto it = json.find(name);
    if (it == json.end()) continue;
    if (!it->is_number_unsigned()) malformed(std::string("model.") + name, "is not a whole number");
    *model_count_field(counts, name) = it->get<std::uint64_t>();
  }
  return counts;
}

std::optional<ModelCounts> model_counts(const std::vector<AttemptRecord>& attempts) {
  std::optional<ModelCounts> total;
  for (const auto& attempt : attempts)
    if (attempt.model) total = total.value_or(ModelCounts{}) += *attempt.model;
  return total;
}

namespace {

AttemptRecord attempt_from_json(const OrderedJson& json) {
  return {.attempt = int_field(json.at("attempt"), "attempt"),
          .pod = short_string(json, "pod"),
          .started_at = short_string(json, "started_at"),
          .ended_at = optional_field<std::string>(json, "ended_at"),
          .exit_code = optional_field<int>(json, "exit_code"),
          .signal = optional_field<int>(json, "signal"),
          .outcome = optional_field<std::string>(json, "outcome"),
          .error = attempt_error(json),
          .model = json.contains("model") && !json["model"].is_null()
                       ? std::optional(model_counts_from_json(json["model"]))
                       : std::nullopt};
}

// The fields that name things: a branch or a disk must not smuggle a path or
// a ref component in through them.
void check_names(const RunParams& params) {
  if (!is_valid_run_id(params.run_id)) malformed("run_id", "is not a valid run id");
  if (!is_valid_pod_name(params.origin_pod))
    malformed("origin_pod", "cannot be part of a branch name");
  if (!params.request.is_object()) malformed("request", "is not an object");
  if (params.attempts.size() > kMaxAttemptRecords)
    malformed("attempts", "has more than " + std::to_string(kMaxAttemptRecords) + " entries");
}

}  // namespace

OrderedJson to_json(const RunParams& params) {
  OrderedJson attempts = OrderedJson::array();
  for (const auto& a : params.attempts) attempts.push_back(attempt_to_json(a));
  OrderedJson json{{"version", 1},
                   {"run_id", params.run_id},
                   {"request", params.request},
                   {"child_name", params.child_name},
                   {"child_digest", params.child_digest},
                   {"child", params.child},
                   {"argv", params.argv},
                   {"cwd", params.cwd},
                   {"origin_pod", params.origin_pod},
                   {"created_at", params.created_at},
                   {"attempts", attempts}};
  if (params.final_status) json["final_status"] = *params.final_status;
  if (params.handed_over) json["handed_over"] = *params.handed_over;
  return json;
}

RunParams run_params_from_json(const OrderedJson& json) {
  try {
    if (int_field(json.at("version"), "version") != 1) malformed("version", "is not 1");
    RunParams params;
    params.run_id = json.at("run_id").get<std::string>();
    params.request = json.at("request");
    // Written before templates had names: the run used the default one.
    params.child_name = json.contains("child_name") ? short_string(json, "child_name")
                                                    : std::string(kDefaultTemplate);
    params.child_digest = json.contains("child_digest") ? short_string(json, "child_digest") : "";
    params.child = json.at("child");
    params.argv = json.at("argv").get<std::vector<std::string>>();
    params.cwd = json.at("cwd").get<std::string>();
    params.origin_pod = json.at("origin_pod").get<std::string>();
    params.created_at = short_string(json, "created_at");
    if (json.at("attempts").size() > kMaxAttemptRecords)
      malformed("attempts", "has more than " + std::to_string(kMaxAttemptRecords) + " entries");
    for (const auto& a : json.at("attempts")) params.attempts.push_back(attempt_from_json(a));
    params.final_status = optional_field<std::string>(json, "final_status");
    params.handed_over = optional_field<std::string>(json, "handed_over");
    check_names(params);
    return params;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("run-params.json: ") + e.what());
  }
}

SpentBudgets spent_budgets(const RunParams& params) {
  SpentBudgets spent;
  for (std::size_t i = 0; i < params.attempts.size(); ++i) {
    const auto& outcome = params.attempts[i].outcome;
    const bool last = i + 1 == params.attempts.size();
    if (outcome == "interrupted")
      ++spent.interruptions;
    else if (outcome == "crashed" || outcome == "deferred" || (!outcome && !last))
      ++spent.failures;
  }
  return spent;
}

std::size_t listed_attempts(const OrderedJson& json) {
  const auto it = json.find("attempts");
  return it != json.end() && it->is_array() ? it->size() : 0;
}

RunParams run_params_from_text(std::string_view text) {
  const auto json = parse_bounded_json(text, {.max_bytes = kMaxRunParamsBytes});
  if (!json) throw std::runtime_error("run-params.json: " + json.error().message);
  return run_params_from_json(*json);
}

std::string run_params_text(const RunParams& params) {
  return to_json(params).dump(2) + "\n";
}

void write_run_params(const std::filesystem::path& run_dir, const RunParams& params,
                      Durability durability) {
  write_file_atomically(run_dir / kRunParamsFile, run_params_text(params), durability);
}

std::optional<RunParams> read_run_params(const std::filesystem::path& run_dir) {
  const auto path = run_dir / kRunParamsFile;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string text(kMaxRunParamsBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  try {
    return run_params_from_text(text);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path.string() + ": " + e.what());
  }
}

void mark_handed_over(const std::filesystem::path& run_dir, const std::string& why) {
  auto params = read_run_params(run_dir);
  if (!params || params->handed_over) return;
  params->handed_over = why;
  write_run_params(run_dir, *params);
}

}  // namespace inflight::checkpoint
