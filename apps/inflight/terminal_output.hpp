// What the operator commands (`inflight checkpoints …`, `inflight runs …`)
// print: tables padded for people, times and sizes as people read them, and
// a failure with what to try next.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "inflight/core/failure.hpp"

namespace inflight::app {

using Table = std::vector<std::vector<std::string>>;

// `2026-11-21T10:15:00Z`
std::string iso_time(std::int64_t epoch_seconds);
// `3m ago`: the largest whole unit.
std::string relative_age(std::int64_t epoch_seconds);
// `1.5 MiB`
std::string human_size(std::uint64_t bytes);
// Columns padded to their widest cell, two spaces apart; the first row is the header.
void print_table(const Table& rows, std::ostream& out = std::cout);

// What a failure means to whoever typed the command.
struct Hint {
  int exit_code;
  std::string hint;
};
// `not_found_hint` names the command that lists what there is.
Hint failure_of(Failure kind, std::string_view not_found_hint);
// Prints what went wrong and what to try; returns the exit code.
int report_failure(const Error& failure, std::string_view not_found_hint);
// `--older-than`'s value in seconds, or nullopt when it is not given;
// UsageError naming the flag for a value that is not a duration.
std::optional<std::int64_t> older_than_seconds(const std::string& text);
// One `inflight: skipped …` line each.
void warn_problems(const std::vector<std::string>& problems);

}  // namespace inflight::app
