// The message of a checkpoint commit, written and read here only (docs/checkpoints.md "What the
// results repo holds"): the subject `inflight checkpoint <run-id> attempt <n> (<reason>)` and the
// trailers `Inflight-Pod:`, `Inflight-Attempt:` and `Inflight-Records:`. Plain text in and out, no
// git: a message read from a branch is data that anyone with push access wrote, so every value is
// checked against its rule.
//
// The trailer lines are shared with the lease's message (lease_record.hpp).
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "inflight/checkpoint/checkpoint_reason.hpp"

namespace inflight::checkpoint {

// Metadata written into each checkpoint commit.
struct CheckpointInfo {
  std::string run_id;
  int attempt = 0;
  CheckpointReason reason = CheckpointReason::manual;
  std::string pod;
  std::uint64_t records = 0;
  std::optional<std::uint64_t> total = std::nullopt;  // records when done, when the template says
};

inline constexpr std::string_view kPodTrailer = "Inflight-Pod";

// `Key: value` and its line end, as every inflight message writes a trailer.
std::string trailer_line(std::string_view key, std::string_view value);
// The value of the trailer `key` (`Key: value` on a line of its own after
// the subject); the last one when the message repeats it, nullopt when it
// has none. The subject never counts, whatever it looks like.
std::optional<std::string_view> find_trailer(std::string_view message, std::string_view key);

// The whole of `text` as a decimal number within [min, max]; nullopt for
// anything else (a sign where none belongs, trailing bytes, an overflow).
template <typename Number>
std::optional<Number> parse_decimal(std::string_view text, Number min, Number max) {
  Number value{};
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(text.data(), last, value);
  if (ec != std::errc{} || end != last || value < min || value > max) return std::nullopt;
  return value;
}

std::string write_checkpoint_message(const CheckpointInfo& info);

// What a checkpoint message says, field by field: a listing shows whatever a
// foreign or damaged message still tells, so each field is read on its own
// and is unset when the message lacks it or its value breaks its rule (a
// run id or pod name that is not one, a reason outside the table, an
// attempt over run-params.json's limit, a number that does not fit).
struct CheckpointMessage {
  std::optional<std::string> run_id;
  // The Inflight-Attempt trailer's when the message has one, else the
  // subject's: the trailer wins.
  std::optional<int> attempt;
  std::optional<CheckpointReason> reason;
  std::optional<std::string> pod;
  std::optional<std::uint64_t> records;
  std::optional<std::uint64_t> total;
};

CheckpointMessage parse_checkpoint_message(std::string_view message);

}  // namespace inflight::checkpoint
