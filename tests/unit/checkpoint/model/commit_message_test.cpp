// The checkpoint commit message read back as a listing and a restore read it:
// what the writer writes comes back field for field, and a message from a
// hostile branch yields only the fields that keep their rules.
#include "inflight/checkpoint/commit_message.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace inflight::checkpoint {
namespace {

constexpr std::string_view kSubject = "inflight checkpoint r1 attempt 2 (claim)";

std::string message_with(std::string_view trailers) {
  return std::string(kSubject) + "\n\n" + std::string(trailers);
}

TEST(CommitMessage, EveryReasonSurvivesTheRoundTrip) {
  for (const auto& [reason, word] : kCheckpointReasons) {
    const CheckpointInfo info{.run_id = "r-1.x_y",
                              .attempt = 7,
                              .reason = reason,
                              .pod = "pod-a",
                              .records = std::numeric_limits<std::uint64_t>::max()};
    const auto text = write_checkpoint_message(info);
    const auto read = parse_checkpoint_message(text);
    EXPECT_EQ(read.run_id, info.run_id) << word;
    EXPECT_EQ(read.attempt, info.attempt) << word;
    EXPECT_EQ(read.reason, reason) << word;
    EXPECT_EQ(read.pod, info.pod) << word;
    EXPECT_EQ(read.records, info.records) << word;
    EXPECT_NE(text.find("(" + std::string(word) + ")"), std::string::npos) << text;
  }
}

// Branches written by earlier releases carry exactly this text.
TEST(CommitMessage, TheWrittenTextIsTheContract) {
  EXPECT_EQ(write_checkpoint_message({.run_id = "r1",
                                      .attempt = 3,
                                      .reason = CheckpointReason::shutdown,
                                      .pod = "pod-a",
                                      .records = 17}),
            "inflight checkpoint r1 attempt 3 (shutdown)\n\nInflight-Pod: pod-a\n"
            "Inflight-Attempt: 3\nInflight-Records: 17\n");
}

TEST(CommitMessage, ReasonsAreSpeltOnceEachWay) {
  for (const auto& [reason, word] : kCheckpointReasons) {
    EXPECT_EQ(to_string(reason), word);
    EXPECT_EQ(parse_checkpoint_reason(word), reason);
  }
  EXPECT_EQ(parse_checkpoint_reason("Shutdown"), std::nullopt);
  EXPECT_EQ(parse_checkpoint_reason(""), std::nullopt);
}

TEST(CommitMessage, AForeignMessageTellsNothing) {
  for (const auto* text : {"", "crafted", "crafted\n\nInflight-Records: many\n", "\n\n\n"}) {
    const auto read = parse_checkpoint_message(text);
    EXPECT_FALSE(read.run_id || read.attempt || read.reason || read.pod || read.records) << text;
  }
}

TEST(CommitMessage, MissingTrailersLeaveTheSubjectsFields) {
  const auto read = parse_checkpoint_message(std::string(kSubject) + "\n");
  EXPECT_EQ(read.run_id, "r1");
  EXPECT_EQ(read.attempt, 2);
  EXPECT_EQ(read.reason, CheckpointReason::claim);
  EXPECT_EQ(read.pod, std::nullopt);
  EXPECT_EQ(read.records, std::nullopt);
}

TEST(CommitMessage, TheAttemptTrailerWinsOverTheSubjectEvenWhenSpoilt) {
  EXPECT_EQ(parse_checkpoint_message(message_with("Inflight-Attempt: 5\n")).attempt, 5);
  EXPECT_EQ(parse_checkpoint_message(message_with("Inflight-Attempt: x\n")).attempt, std::nullopt);
}

TEST(CommitMessage, NumbersOutOfRangeAreUnset) {
  for (const auto* attempt : {"1001", "-1", "+1", "99999999999999999999", "1 ", "0x1", ""})
    EXPECT_EQ(
        parse_checkpoint_message(message_with("Inflight-Attempt: " + std::string(attempt))).attempt,
        std::nullopt)
        << attempt;
  EXPECT_EQ(parse_checkpoint_message(message_with("Inflight-Attempt: 1000")).attempt, 1000);
  EXPECT_EQ(
      parse_checkpoint_message(message_with("Inflight-Records: 18446744073709551616")).records,
      std::nullopt);
  EXPECT_EQ(parse_checkpoint_message(message_with("Inflight-Records: -3")).records, std::nullopt);
  const auto huge_subject =
      parse_checkpoint_message("inflight checkpoint r1 attempt 99999999999999 (periodic)");
  EXPECT_EQ(huge_subject.attempt, std::nullopt);
  EXPECT_EQ(huge_subject.reason, CheckpointReason::periodic);
}

TEST(CommitMessage, ADuplicatedTrailerIsReadFromItsLastLine) {
  const auto read = parse_checkpoint_message(
      message_with("Inflight-Pod: pod-a\nInflight-Records: 4\nInflight-Pod: pod-b\n"
                   "Inflight-Records: lots\n"));
  EXPECT_EQ(read.pod, "pod-b");
  EXPECT_EQ(read.records, std::nullopt);
}

TEST(CommitMessage, TheSubjectIsNeverATrailer) {
  const auto read = parse_checkpoint_message("Inflight-Pod: pod-evil\n\nInflight-Records: 3\n");
  EXPECT_EQ(read.pod, std::nullopt);
  EXPECT_EQ(read.records, 3u);
  EXPECT_EQ(find_trailer("Inflight-Pod: pod-evil", kPodTrailer), std::nullopt);
}

TEST(CommitMessage, TrailerKeysMatchWholeAndExactly) {
  for (const auto* line : {"Inflight-Podx: p", "inflight-pod: p", "Inflight-Pod:p",
                           " Inflight-Pod: p", "X-Inflight-Pod: p"})
    EXPECT_EQ(find_trailer(message_with(line), kPodTrailer), std::nullopt) << line;
  EXPECT_EQ(find_trailer(message_with("Inflight-Pod: p\r\n"), kPodTrailer), "p\r");
}

TEST(CommitMessage, SubjectsOfAnotherShapeTellNothing) {
  for (const auto* subject : {
           "inflight checkpoint r1 attempt 2 (claim) ",
           "inflight checkpoint r1 attempt 2 claim",
           "inflight checkpoint r1 attempts 2 (claim)",
           "Inflight checkpoint r1 attempt 2 (claim)",
           "inflight checkpoint  attempt 2",
       }) {
    const auto read = parse_checkpoint_message(subject);
    EXPECT_FALSE(read.run_id || read.attempt || read.reason) << subject;
  }
}

TEST(CommitMessage, EachSubjectFieldKeepsItsOwnRule) {
  const auto bad_id = parse_checkpoint_message("inflight checkpoint ../x attempt 2 (shutdown)");
  EXPECT_EQ(bad_id.run_id, std::nullopt);
  EXPECT_EQ(bad_id.reason, CheckpointReason::shutdown);
  const auto bad_reason = parse_checkpoint_message("inflight checkpoint r1 attempt 2 (bogus)");
  EXPECT_EQ(bad_reason.run_id, "r1");
  EXPECT_EQ(bad_reason.reason, std::nullopt);
  EXPECT_EQ(bad_reason.attempt, 2);
}

TEST(CommitMessage, NamesThatAreNotUtf8OrNotNamesAreUnset) {
  const auto read = parse_checkpoint_message(
      "inflight checkpoint r\xff\xfe attempt 1 (final)\n\nInflight-Pod: p\xc3\x28\n");
  EXPECT_EQ(read.run_id, std::nullopt);
  EXPECT_EQ(read.pod, std::nullopt);
  EXPECT_EQ(read.reason, CheckpointReason::final);
  for (const auto* pod : {"", "a b", "..", ".hidden", "a..b", "pod\x1b[31m"})
    EXPECT_EQ(parse_checkpoint_message(message_with("Inflight-Pod: " + std::string(pod))).pod,
              std::nullopt)
        << pod;
}

TEST(CommitMessage, TrailerLinesAreKeyColonSpaceValue) {
  EXPECT_EQ(trailer_line("Inflight-Pod", "p"), "Inflight-Pod: p\n");
  EXPECT_EQ(find_trailer("s\n\n" + trailer_line("K", "v w"), "K"), "v w");
}

}  // namespace
}  // namespace inflight::checkpoint
