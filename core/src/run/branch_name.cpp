#include "inflight/core/branch_name.hpp"

#include <cstdio>
#include <ctime>
#include <random>

#include "inflight/core/fnv1a.hpp"

namespace inflight::checkpoint {

namespace {

bool is_alnum(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

}  // namespace

bool is_valid_run_id(std::string_view id) {
  if (id.empty() || id.size() > 64 || !is_alnum(id.front())) return false;
  for (char c : id)
    if (!is_alnum(c) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

std::string generate_run_id() {
  static std::mt19937 random{std::random_device{}()};
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[48];
  const auto len = std::strftime(buf, sizeof buf, "r-%Y%m%dT%H%M%SZ-", &tm);
  std::snprintf(buf + len, sizeof buf - len, "%06x", static_cast<unsigned>(random() & 0xffffff));
  return buf;
}

bool is_valid_pod_name(std::string_view pod) {
  if (pod.empty() || pod.size() > 253 || pod.front() == '.' || pod.ends_with(".lock") ||
      pod.find("..") != std::string_view::npos || pod.find("@{") != std::string_view::npos)
    return false;
  for (unsigned char c : pod)
    if (c <= ' ' || c >= 0x7f ||
        std::string_view("/~^:?*[\\").find(static_cast<char>(c)) != std::string_view::npos)
      return false;
  return true;
}

std::string branch_ref(const BranchName& name) {
  return std::string(kBranchPrefix) + name.pod + "/" + name.run_id;
}

std::string short_branch(std::string_view ref) {
  if (ref.starts_with(kHeadsPrefix)) ref.remove_prefix(kHeadsPrefix.size());
  return std::string(ref);
}

std::string branch_name(const BranchName& name) {
  return short_branch(branch_ref(name));
}

std::optional<BranchName> parse_branch_ref(std::string_view ref) {
  if (!ref.starts_with(kBranchPrefix)) return std::nullopt;
  ref.remove_prefix(kBranchPrefix.size());
  const auto slash = ref.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  BranchName name{std::string(ref.substr(0, slash)), std::string(ref.substr(slash + 1))};
  if (!is_valid_pod_name(name.pod) || !is_valid_run_id(name.run_id)) return std::nullopt;
  return name;
}

std::optional<BranchName> parse_run_target(std::string_view target) {
  if (is_valid_run_id(target)) return BranchName{.pod = "", .run_id = std::string(target)};
  return parse_branch_ref(target.starts_with(kHeadsPrefix)
                              ? std::string(target)
                              : std::string(kHeadsPrefix) + std::string(target));
}

std::string lease_ref(std::string_view pod) {
  return std::string(kLeasePrefix) + std::string(pod);
}

std::optional<std::string> parse_lease_ref(std::string_view ref) {
  if (!ref.starts_with(kLeasePrefix)) return std::nullopt;
  ref.remove_prefix(kLeasePrefix.size());
  if (!is_valid_pod_name(ref)) return std::nullopt;
  return std::string(ref);
}

std::string result_ref(std::string_view run_id) {
  return std::string(kResultPrefix) + std::string(run_id);
}

std::optional<std::string> parse_result_ref(std::string_view ref) {
  if (!ref.starts_with(kResultPrefix)) return std::nullopt;
  ref.remove_prefix(kResultPrefix.size());
  if (!is_valid_run_id(ref)) return std::nullopt;
  return std::string(ref);
}

std::string index_path(std::string_view run_id) {
  return "runs/" + std::string(run_id) + ".json";
}

std::string runs_bucket(std::string_view run_id) {
  Fnv1a hash;
  hash.mix(run_id);
  char hex[3];
  std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned>(hash.value() & 0xff));
  return hex;
}

}  // namespace inflight::checkpoint
