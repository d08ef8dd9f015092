#include "inflight/checkpoint/run_params.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "inflight/checkpoint/run_dir.hpp"

namespace inflight::checkpoint {

namespace {

template <typename T>
OrderedJson optional_json(const std::optional<T>& value) {
  return value ? OrderedJson(*value) : OrderedJson(nullptr);
}

template <typename T>
std::optional<T> optional_field(const OrderedJson& json, const char* key) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null()) return std::nullopt;
  return it->get<T>();
}

OrderedJson attempt_to_json(const AttemptRecord& a) {
  return {{"attempt", a.attempt},
          {"pod", a.pod},
          {"started_at", a.started_at},
          {"ended_at", optional_json(a.ended_at)},
          {"exit_code", optional_json(a.exit_code)},
          {"signal", optional_json(a.signal)},
          {"outcome", optional_json(a.outcome)}};
}

AttemptRecord attempt_from_json(const OrderedJson& json) {
  AttemptRecord a;
  a.attempt = json.at("attempt").get<int>();
  a.pod = json.at("pod").get<std::string>();
  a.started_at = json.at("started_at").get<std::string>();
  a.ended_at = optional_field<std::string>(json, "ended_at");
  a.exit_code = optional_field<int>(json, "exit_code");
  a.signal = optional_field<int>(json, "signal");
  a.outcome = optional_field<std::string>(json, "outcome");
  return a;
}

}  // namespace

OrderedJson to_json(const RunParams& params) {
  OrderedJson attempts = OrderedJson::array();
  for (const auto& a : params.attempts) attempts.push_back(attempt_to_json(a));
  OrderedJson json{{"version", 1},
                   {"run_id", params.run_id},
                   {"request", params.request},
                   {"child", params.child},
                   {"argv", params.argv},
                   {"cwd", params.cwd},
                   {"origin_pod", params.origin_pod},
                   {"created_at", params.created_at},
                   {"attempts", attempts}};
  if (params.final_status) json["final_status"] = *params.final_status;
  return json;
}

RunParams run_params_from_json(const OrderedJson& json) {
  try {
    if (json.at("version").get<int>() != 1) throw std::runtime_error("unsupported version");
    RunParams params;
    params.run_id = json.at("run_id").get<std::string>();
    params.request = json.at("request");
    params.child = json.at("child");
    params.argv = json.at("argv").get<std::vector<std::string>>();
    params.cwd = json.at("cwd").get<std::string>();
    params.origin_pod = json.at("origin_pod").get<std::string>();
    params.created_at = json.at("created_at").get<std::string>();
    for (const auto& a : json.at("attempts")) params.attempts.push_back(attempt_from_json(a));
    params.final_status = optional_field<std::string>(json, "final_status");
    return params;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("run-params.json: ") + e.what());
  }
}

void write_run_params(const std::filesystem::path& run_dir, const RunParams& params,
                      Durability durability) {
  write_file_atomically(run_dir / kRunParamsFile, to_json(params).dump(2) + "\n", durability);
}

std::optional<RunParams> read_run_params(const std::filesystem::path& run_dir) {
  std::ifstream in(run_dir / kRunParamsFile);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const auto json = OrderedJson::parse(text.str(), nullptr, false);
  if (json.is_discarded())
    throw std::runtime_error((run_dir / kRunParamsFile).string() + ": not valid JSON");
  return run_params_from_json(json);
}

}  // namespace inflight::checkpoint
