// What the journal's line format, its scan and its writer share
// (model_journal.hpp): its errors and its segments' names.
#pragma once

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "inflight/core/failure.hpp"

namespace inflight::models {

inline constexpr std::string_view kSegmentPrefix = "calls-";
inline constexpr std::string_view kSegmentSuffix = ".jsonl";
inline constexpr std::size_t kSegmentDigits = 6;

inline Error journal_error(std::string message) {
  return Error{.kind = Failure::other, .message = std::move(message), .candidates = {}};
}

// An Error naming what failed and errno's words for why.
inline Error journal_errno_error(const std::string& what) {
  return journal_error(what + ": " + std::strerror(errno));
}

// The segment's number in `name` (calls-000001.jsonl), from 1; nullopt for
// any other name.
inline std::optional<std::size_t> parse_segment_number(std::string_view name) {
  if (name.size() != kSegmentPrefix.size() + kSegmentDigits + kSegmentSuffix.size() ||
      !name.starts_with(kSegmentPrefix) || !name.ends_with(kSegmentSuffix))
    return std::nullopt;
  std::size_t number = 0;
  for (char c : name.substr(kSegmentPrefix.size(), kSegmentDigits)) {
    if (c < '0' || c > '9') return std::nullopt;
    number = number * 10 + static_cast<std::size_t>(c - '0');
  }
  return number == 0 ? std::nullopt : std::optional(number);
}

}  // namespace inflight::models
