#include "inflight/checkpoint/commit_message.hpp"

#include <limits>

#include "inflight/core/branch_name.hpp"
#include "inflight/core/run_params.hpp"

namespace inflight::checkpoint {

namespace {

constexpr std::string_view kSubjectPrefix = "inflight checkpoint ";
constexpr std::string_view kSubjectAttempt = " attempt ";
constexpr std::string_view kSubjectReasonOpen = " (";
constexpr char kSubjectReasonClose = ')';
constexpr std::string_view kTrailerSeparator = ": ";
constexpr std::string_view kAttemptTrailer = "Inflight-Attempt";
constexpr std::string_view kRecordsTrailer = "Inflight-Records";
constexpr std::string_view kTotalTrailer = "Inflight-Total";

// Removes `prefix` from the front of `text`, when it is there.
bool consume(std::string_view& text, std::string_view prefix) {
  if (!text.starts_with(prefix)) return false;
  text.remove_prefix(prefix.size());
  return true;
}

// The text up to `end` (or all of it), removed from `text`; `end` stays.
std::string_view take_until(std::string_view& text, char end) {
  const auto word = text.substr(0, text.find(end));
  text.remove_prefix(word.size());
  return word;
}

struct Subject {
  std::string_view run_id;
  std::string_view attempt;
  std::string_view reason;
};

// The parts of `inflight checkpoint <run-id> attempt <n> (<reason>)`, each
// unchecked; nullopt for a line of another shape.
std::optional<Subject> split_subject(std::string_view line) {
  Subject subject;
  if (!consume(line, kSubjectPrefix)) return std::nullopt;
  subject.run_id = take_until(line, ' ');
  if (!consume(line, kSubjectAttempt)) return std::nullopt;
  subject.attempt = take_until(line, ' ');
  if (!consume(line, kSubjectReasonOpen) || !line.ends_with(kSubjectReasonClose))
    return std::nullopt;
  subject.reason = line.substr(0, line.size() - 1);
  return subject;
}

std::optional<int> attempt_number(std::string_view text) {
  return parse_decimal<int>(text, 0, static_cast<int>(kMaxAttemptRecords));
}

std::optional<std::string> text_if(std::string_view text, bool valid) {
  return valid ? std::optional<std::string>(text) : std::nullopt;
}

void read_subject(std::string_view line, CheckpointMessage& message) {
  const auto subject = split_subject(line);
  if (!subject) return;
  message.run_id = text_if(subject->run_id, is_valid_run_id(subject->run_id));
  message.attempt = attempt_number(subject->attempt);
  message.reason = parse_checkpoint_reason(subject->reason);
}

void read_trailers(std::string_view text, CheckpointMessage& message) {
  if (const auto pod = find_trailer(text, kPodTrailer))
    message.pod = text_if(*pod, is_valid_pod_name(*pod));
  if (const auto attempt = find_trailer(text, kAttemptTrailer))
    message.attempt = attempt_number(*attempt);
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  if (const auto records = find_trailer(text, kRecordsTrailer))
    message.records = parse_decimal<std::uint64_t>(*records, 0, kMax);
  if (const auto total = find_trailer(text, kTotalTrailer))
    message.total = parse_decimal<std::uint64_t>(*total, 0, kMax);
}

}  // namespace

std::string trailer_line(std::string_view key, std::string_view value) {
  std::string line(key);
  line += kTrailerSeparator;
  line += value;
  line += '\n';
  return line;
}

std::optional<std::string_view> find_trailer(std::string_view message, std::string_view key) {
  std::optional<std::string_view> found;
  take_until(message, '\n');  // the subject
  while (consume(message, "\n")) {
    auto line = take_until(message, '\n');
    if (consume(line, key) && consume(line, kTrailerSeparator)) found = line;
  }
  return found;
}

std::string write_checkpoint_message(const CheckpointInfo& info) {
  const std::string attempt = std::to_string(info.attempt);
  return std::string(kSubjectPrefix) + info.run_id + std::string(kSubjectAttempt) + attempt +
         std::string(kSubjectReasonOpen) + std::string(to_string(info.reason)) +
         kSubjectReasonClose + "\n\n" + trailer_line(kPodTrailer, info.pod) +
         trailer_line(kAttemptTrailer, attempt) +
         trailer_line(kRecordsTrailer, std::to_string(info.records)) +
         (info.total ? trailer_line(kTotalTrailer, std::to_string(*info.total)) : "");
}

CheckpointMessage parse_checkpoint_message(std::string_view text) {
  CheckpointMessage message;
  read_subject(text.substr(0, text.find('\n')), message);
  read_trailers(text, message);
  return message;
}

}  // namespace inflight::checkpoint
