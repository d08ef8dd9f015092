#include "run_id.hpp"

#include <ctime>
#include <random>
#include <regex>

namespace inflight {

bool is_valid_run_id(const std::string& id) {
  static const std::regex kRunId("^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$");
  return std::regex_match(id, kRunId);
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

}  // namespace inflight
