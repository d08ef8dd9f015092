#include "terminal_output.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "inflight/core/clock.hpp"
#include "inflight/core/duration.hpp"
#include "inflight/core/exit_code.hpp"
#include "inflight/core/text_table.hpp"
#include "inflight/supervisor/config/settings.hpp"

namespace inflight::app {

namespace {

std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(SystemClock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string iso_time(std::int64_t epoch_seconds) {
  return iso8601_utc(SystemClock::from_time_t(static_cast<std::time_t>(epoch_seconds)));
}

std::string relative_age(std::int64_t epoch_seconds) {
  const std::int64_t age = std::max<std::int64_t>(0, now_seconds() - epoch_seconds);
  if (age < 60) return std::to_string(age) + "s ago";
  if (age < 3600) return std::to_string(age / 60) + "m ago";
  if (age < 86400) return std::to_string(age / 3600) + "h ago";
  return std::to_string(age / 86400) + "d ago";
}

std::string human_size(std::uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024;
  std::size_t unit = 0;
  for (; value >= 1024 && unit + 1 < std::size(units); ++unit) value /= 1024;
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

void print_table(const Table& rows, std::ostream& out) {
  out << padded_table(rows);
}

Hint failure_of(Failure kind, std::string_view not_found_hint) {
  switch (kind) {
    case Failure::unreachable:
    case Failure::deadline:
      return {kExitUnreachable,
              "check --results-repo and the network; a slow remote needs a longer --git-timeout"};
    case Failure::auth:
      return {kExitUnreachable, "check --git-username and --git-token, or --git-ssh-key"};
    case Failure::not_found:
      return {kExitNotFound, std::string(not_found_hint)};
    default:
      return {kExitFailure,
              "check that --results-repo names a git repository inflight can write to"};
  }
}

int report_failure(const Error& failure, std::string_view not_found_hint) {
  if (failure.kind == Failure::ambiguous && !failure.candidates.empty()) {
    const auto& branches = failure.candidates;
    std::cerr << "inflight: " << failure.message << ": " << branches.front() << "\n";
    for (std::size_t i = 1; i < branches.size(); ++i) std::cerr << "  " << branches[i] << "\n";
    std::cerr << "name one branch, e.g. `inflight checkpoints show " << branches.front() << "`\n";
    return kExitUsage;
  }
  const Hint hint = failure_of(failure.kind, not_found_hint);
  std::cerr << "inflight: " << failure.message << "\n" << hint.hint << "\n";
  return hint.exit_code;
}

std::optional<std::int64_t> older_than_seconds(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const auto age = parse_duration(text);
  if (!age)
    throw UsageError("--older-than '" + text + "' is not a duration; write e.g. 90m, 12h or 7d");
  return std::chrono::duration_cast<std::chrono::seconds>(*age).count();
}

void warn_problems(const std::vector<std::string>& problems) {
  for (const auto& problem : problems) std::cerr << "inflight: skipped " << problem << "\n";
}

}  // namespace inflight::app
