// The model-call journal on disk: its record format both ways (and the v1 lines of journals
// written before it), the writer's segments and limits, and the scan's verdict on what a child
// may have left in the run dir (torn records, bad records, strange names, symlinks).
#include "inflight/supervisor/models/model_journal.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "inflight/supervisor/models/model_request.hpp"
#include "temp_dir.hpp"

namespace inflight::models {
namespace {

namespace fs = std::filesystem;

JournalRecord journal_record(int n, std::string body = "") {
  if (body.empty())
    body = R"({"choices":[{"message":{"content":"answer )" + std::to_string(n) +
           R"("}}],"usage":{"prompt_tokens":3,"completion_tokens":4}})";
  const auto request_body = R"({"n":)" + std::to_string(n % 2) + "}";
  RequestParts parts{.model = "openai",
                     .method = "POST",
                     .path = "/v1/chat/completions",
                     .query = "",
                     .identity_headers = {},
                     .body = request_body};
  return {.digest = request_digest(parts, {}),
          .model = "openai",
          .method = "POST",
          .path = "/v1/chat/completions",
          .attempt = 1,
          .status = 200,
          .content_type = "application/json",
          .stream = false,
          .body = std::move(body),
          .started_at = "2026-11-21T10:15:00Z",
          .ms = 1234,
          .usage = {.input = 3, .output = 4}};
}

fs::path journal_dir_of(const fs::path& run_dir) {
  return run_dir / kJournalDir;
}
fs::path segment_of(const fs::path& run_dir, std::size_t number) {
  return journal_dir_of(run_dir) / journal_segment_name(number);
}

std::string file_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void append_raw(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::app) << bytes;
}

// A writer for `run_dir` opened on a fresh scan, which must be readable.
JournalWriter open_writer(const fs::path& run_dir, const JournalLimits& limits = {}) {
  const auto scan = scan_journal(run_dir, limits);
  EXPECT_FALSE(scan.problem) << *scan.problem;
  auto writer = JournalWriter::open(run_dir, limits, scan);
  EXPECT_TRUE(writer.has_value()) << writer.error().message;
  return std::move(*writer);
}

void record_all(JournalWriter& writer, int from, int to) {
  for (int n = from; n < to; ++n) {
    const auto appended = writer.append(journal_record(n));
    ASSERT_TRUE(appended.has_value()) << appended.error().message;
    ASSERT_EQ(*appended, JournalWriter::Appended::recorded);
  }
}

// ---------------------------------------------------------------- the record

// The header line: an ordered_json of the fields, dumped with U+FFFD for bytes that are not
// UTF-8. The writer writes it field by field; the two forms must not drift.
nlohmann::ordered_json header_fields(const JournalRecord& record, int version) {
  const auto count = [](const std::optional<std::uint64_t>& n) {
    return n ? nlohmann::ordered_json(*n) : nlohmann::ordered_json(nullptr);
  };
  return {
      {"v", version},
      {"digest", record.digest},
      {"model", record.model},
      {"method", record.method},
      {"path", record.path},
      {"attempt", record.attempt},
      {"status", record.status},
      {"content_type", record.content_type},
      {"stream", record.stream},
      {"started_at", record.started_at},
      {"ms", record.ms},
      {"usage", {{"input", count(record.usage.input)}, {"output", count(record.usage.output)}}}};
}
std::string dumped(const nlohmann::ordered_json& json) {
  return json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

// A line of the journal's first format, v1, as inflight wrote it before v2: the body inside,
// base64 when it is not UTF-8. Journals of runs begun then must keep replaying.
std::string v1_line(const JournalRecord& record, const std::string& body_base64 = "") {
  auto json = header_fields(record, 1);
  if (body_base64.empty())
    json["body"] = record.body;
  else
    json["body_base64"] = body_base64;
  return dumped(json);
}

TEST(JournalRecord, RoundTripsEveryField) {
  auto record = journal_record(1);
  record.stream = true;
  record.content_type = "text/event-stream";
  record.body = "data: {\"x\":\"caf\xc3\xa9\"}\n\ndata: [DONE]\n\n";
  record.usage = {.input = 5, .output = std::nullopt};
  const auto bytes = write_journal_record(record);
  const auto header = bytes.substr(0, bytes.find('\n') + 1);
  EXPECT_NE(header.find(R"({"v":2,)"), std::string::npos);
  EXPECT_NE(header.find(R"("usage":{"input":5,"output":null})"), std::string::npos);
  EXPECT_EQ(bytes, header + record.body + "\n");
  const auto parsed = parse_journal_record(bytes);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  EXPECT_EQ(*parsed, record);
}

TEST(JournalRecord, HasAHeaderThatAnOrderedJsonOfItsFieldsDumpsByteForByte) {
  auto odd = journal_record(5, "caf\xc3\xa9 \"quoted\"\n\x01");
  odd.path = "/v1/chat/\xff\xfe\"x\"\\y\x7f";
  odd.content_type = "text/plain; q=\"1\"\t\x80";
  odd.method = "P\xc3\xa9ST";
  odd.stream = true;
  odd.usage = {.input = std::nullopt, .output = 18446744073709551615u};
  odd.ms = 0;
  auto nulls = journal_record(6);
  nulls.usage = {};
  for (const auto& record : {journal_record(1), odd, nulls}) {
    auto header = header_fields(record, 2);
    header["body_bytes"] = record.body.size();
    EXPECT_EQ(write_journal_record(record), dumped(header) + record.body + "\n") << record.path;
  }
}

TEST(JournalRecord, KeepsEveryByteOfABodyAsItIs) {
  std::string every_byte;
  for (int c = 0; c < 256; ++c) every_byte += static_cast<char>(c);
  const auto looks_like_a_record = write_journal_record(journal_record(4));
  for (const std::string& body :
       {every_byte, std::string(), std::string("\n"), std::string("\n\n\n"), std::string("\xff"),
        std::string("\x80\0z", 3), std::string("ok\xc3"), looks_like_a_record}) {
    auto record = journal_record(2);
    record.body = body;  // journal_record gives an empty one a default
    const auto bytes = write_journal_record(record);
    EXPECT_EQ(bytes.size(), bytes.find('\n') + 1 + body.size() + 1);
    const auto parsed = parse_journal_record(bytes);
    ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
    EXPECT_EQ(parsed->body, body);
  }
}

TEST(JournalRecord, HoldsNoFieldForHeaders) {
  const auto bytes = write_journal_record(journal_record(1));
  const auto json = nlohmann::json::parse(bytes.substr(0, bytes.find('\n')));
  std::set<std::string> keys;
  for (const auto& [key, value] : json.items()) keys.insert(key);
  EXPECT_EQ(keys, (std::set<std::string>{"v", "digest", "model", "method", "path", "attempt",
                                         "status", "content_type", "stream", "started_at", "ms",
                                         "usage", "body_bytes"}));
}

TEST(JournalRecord, ReadsAV1LineAsItsFirstWriterWroteIt) {
  std::string controls;
  for (int c = 0; c < 0x20; ++c) controls += static_cast<char>(c);
  for (const std::string& body : {std::string("plain"), controls, std::string("\"\\/\x7f"),
                                  std::string("caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80\n"),
                                  std::string("data: {\"a\":\"b\\n\"}\r\n\r\n")}) {
    const auto record = journal_record(3, body);
    const auto parsed = parse_journal_record(v1_line(record));
    ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
    EXPECT_EQ(*parsed, record);
    const auto line = parse_journal_line(v1_line(record));
    ASSERT_TRUE(line.has_value());
    EXPECT_EQ(line->bytes_after_line, 0u);
  }
  const auto binary = journal_record(7, std::string("\xff\x00\x01", 3));
  const auto parsed = parse_journal_record(v1_line(binary, "/wAB"));
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  EXPECT_EQ(*parsed, binary);
}

TEST(JournalRecord, RefusesAV1LineNamingWhatIsWrong) {
  const auto good = nlohmann::json::parse(v1_line(journal_record(1)));
  const auto refused = [&](const char* key, const nlohmann::json& value) {
    auto bad = good;
    if (value.is_discarded())
      bad.erase(key);
    else
      bad[key] = value;
    const auto parsed = parse_journal_record(bad.dump() + "\n");
    EXPECT_FALSE(parsed.has_value()) << key;
    return parsed ? std::string() : parsed.error().message;
  };
  const auto missing = nlohmann::json(nlohmann::json::value_t::discarded);
  EXPECT_NE(refused("v", 3).find("v "), std::string::npos);
  EXPECT_NE(refused("digest", missing).find("digest"), std::string::npos);
  EXPECT_NE(refused("digest", std::string(64, 'A')).find("digest"), std::string::npos);
  EXPECT_NE(refused("status", 42).find("status"), std::string::npos);
  EXPECT_NE(refused("attempt", -1).find("attempt"), std::string::npos);
  EXPECT_NE(refused("stream", "yes").find("stream"), std::string::npos);
  EXPECT_NE(refused("usage", {{"input", -1}, {"output", nullptr}}).find("input"),
            std::string::npos);
  EXPECT_NE(refused("body_base64", "AAAA").find("body"), std::string::npos);
  EXPECT_NE(refused("body", missing).find("body"), std::string::npos);
  auto base64 = good;
  base64.erase("body");
  base64["body_base64"] = "not base64!";
  EXPECT_FALSE(parse_journal_record(base64.dump()).has_value());
  base64["body_base64"] = "QUJD";
  EXPECT_EQ(parse_journal_record(base64.dump())->body, "ABC");
  EXPECT_FALSE(parse_journal_record(v1_line(journal_record(1)) + "more\n").has_value());
  EXPECT_FALSE(parse_journal_record("{\"v\":1,").has_value());
  EXPECT_FALSE(parse_journal_record("[]").has_value());
}

TEST(JournalRecord, RefusesARecordWhoseBodyIsNotWhereItsHeaderSays) {
  const auto bytes = write_journal_record(journal_record(1));
  const auto header_size = bytes.find('\n') + 1;
  const auto refusal = [](const std::string& text) {
    const auto parsed = parse_journal_record(text);
    return parsed ? std::string("read") : parsed.error().message;
  };
  EXPECT_NE(refusal(bytes.substr(0, bytes.size() - 1)).find("not the"), std::string::npos);
  EXPECT_NE(refusal(bytes + "x").find("not the"), std::string::npos);
  EXPECT_NE(refusal(bytes.substr(0, bytes.size() - 1) + "x").find("without a newline"),
            std::string::npos);
  EXPECT_NE(refusal(bytes.substr(0, header_size)).find("not the"), std::string::npos);
  auto header = nlohmann::ordered_json::parse(bytes.substr(0, header_size));
  header["body_bytes"] = 1ull << 41;
  EXPECT_NE(refusal(header.dump() + "\n").find("body_bytes"), std::string::npos);
  header.erase("body_bytes");
  EXPECT_NE(refusal(header.dump() + "\n").find("body_bytes"), std::string::npos);
}

// ---------------------------------------------------------------- writer and scan

TEST(JournalScan, FindsNothingWhereThereIsNoJournal) {
  TempDir run;
  const auto scan = scan_journal(run.path(), {});
  EXPECT_FALSE(scan.problem);
  EXPECT_EQ(scan.records, 0u);
  EXPECT_TRUE(scan.segments.empty());
  EXPECT_FALSE(fs::exists(journal_dir_of(run.path())));
}

TEST(JournalWriter, RecordsWhatTheScanReadsBackInOrder) {
  TempDir run;
  auto writer = open_writer(run.path());
  record_all(writer, 0, 4);  // digests of 0, 2 and of 1, 3 are alike

  const auto scan = scan_journal(run.path(), {});
  ASSERT_FALSE(scan.problem) << *scan.problem;
  EXPECT_EQ(scan.records, 4u);
  EXPECT_FALSE(scan.torn_tail_dropped);
  ASSERT_EQ(scan.segments.size(), 1u);
  EXPECT_EQ(scan.segments[0], segment_of(run.path(), 1));
  EXPECT_EQ(scan.bytes, writer.bytes());
  EXPECT_EQ(scan.bytes, fs::file_size(segment_of(run.path(), 1)));
  ASSERT_EQ(scan.by_digest.size(), 2u);
  const auto& evens = scan.by_digest.at(journal_record(0).digest);
  ASSERT_EQ(evens.size(), 2u);
  EXPECT_LT(evens[0].offset, evens[1].offset);
  const auto second = read_journal_entry(scan, evens[1]);
  ASSERT_TRUE(second.has_value()) << second.error().message;
  EXPECT_EQ(*second, journal_record(2));
}

TEST(JournalWriter, GoesOnAfterWhatAnEarlierWriterRecorded) {
  TempDir run;
  {
    auto writer = open_writer(run.path());
    record_all(writer, 0, 2);
  }
  auto writer = open_writer(run.path());
  EXPECT_EQ(writer.bytes(), fs::file_size(segment_of(run.path(), 1)));
  record_all(writer, 2, 3);
  EXPECT_EQ(scan_journal(run.path(), {}).records, 3u);
}

// Two whole records and then `tail`, as a pod's death mid-write leaves them: the scan drops the
// tail, the writer cuts it off and records after the two.
void expect_torn_tail_dropped(const std::string& tail) {
  TempDir run;
  {
    auto writer = open_writer(run.path());
    record_all(writer, 0, 2);
  }
  const auto segment = segment_of(run.path(), 1);
  const auto whole = fs::file_size(segment);
  append_raw(segment, tail);

  auto scan = scan_journal(run.path(), {});
  ASSERT_FALSE(scan.problem) << *scan.problem;
  EXPECT_TRUE(scan.torn_tail_dropped);
  EXPECT_EQ(scan.records, 2u);
  EXPECT_EQ(scan.bytes, whole);

  auto writer = JournalWriter::open(run.path(), {}, scan);
  ASSERT_TRUE(writer.has_value()) << writer.error().message;
  EXPECT_EQ(fs::file_size(segment), whole);
  record_all(*writer, 2, 3);
  scan = scan_journal(run.path(), {});
  EXPECT_FALSE(scan.problem);
  EXPECT_FALSE(scan.torn_tail_dropped);
  EXPECT_EQ(scan.records, 3u);
}

TEST(JournalScan, DropsATornLastRecordWhichTheWriterCutsOff) {
  // Cut within the header, within the body, and just before the last '\n'.
  const auto record = write_journal_record(journal_record(9));
  for (const auto cut : {std::size_t{40}, record.find('\n') + 20, record.size() - 1}) {
    SCOPED_TRACE(cut);
    expect_torn_tail_dropped(record.substr(0, cut));
  }
}

TEST(JournalScan, DropsAnUnparsableLastLine) {
  TempDir run;
  {
    auto writer = open_writer(run.path());
    record_all(writer, 0, 1);
  }
  const auto whole = fs::file_size(segment_of(run.path(), 1));
  append_raw(segment_of(run.path(), 1), "{\"v\":1,\"torn\n");
  const auto scan = scan_journal(run.path(), {});
  ASSERT_FALSE(scan.problem) << *scan.problem;
  EXPECT_TRUE(scan.torn_tail_dropped);
  EXPECT_EQ(scan.records, 1u);
  ASSERT_TRUE(JournalWriter::open(run.path(), {}, scan).has_value());
  EXPECT_EQ(fs::file_size(segment_of(run.path(), 1)), whole);
}

TEST(JournalScan, ABadLineBeforeTheLastIsAProblem) {
  TempDir run;
  {
    auto writer = open_writer(run.path());
    record_all(writer, 0, 1);
  }
  append_raw(segment_of(run.path(), 1), "not a record\n" + write_journal_record(journal_record(1)));
  const auto scan = scan_journal(run.path(), {});
  ASSERT_TRUE(scan.problem);
  EXPECT_NE(scan.problem->find("calls-000001.jsonl"), std::string::npos);
  EXPECT_TRUE(scan.by_digest.empty());
  const auto writer = JournalWriter::open(run.path(), {}, scan);
  EXPECT_FALSE(writer.has_value());
}

TEST(JournalScan, ABodyNotFollowedByItsNewlineIsAProblem) {
  TempDir run;
  fs::create_directories(journal_dir_of(run.path()));
  auto first = write_journal_record(journal_record(0));
  first.back() = 'x';
  append_raw(segment_of(run.path(), 1), first + write_journal_record(journal_record(1)));
  const auto scan = scan_journal(run.path(), {});
  ASSERT_TRUE(scan.problem);
  EXPECT_NE(scan.problem->find("calls-000001.jsonl at byte 0"), std::string::npos) << *scan.problem;
  EXPECT_NE(scan.problem->find("without a newline"), std::string::npos) << *scan.problem;
}

TEST(JournalScan, ReadsV1LinesAndTheV2RecordsAppendedAfterThem) {
  TempDir run;
  fs::create_directories(journal_dir_of(run.path()));
  append_raw(segment_of(run.path(), 1), v1_line(journal_record(0)) + v1_line(journal_record(1)));
  {
    auto writer = open_writer(run.path());
    record_all(writer, 2, 4);
  }
  const auto scan = scan_journal(run.path(), {});
  ASSERT_FALSE(scan.problem) << *scan.problem;
  EXPECT_EQ(scan.records, 4u);
  for (int n : {0, 1}) {
    const auto& answers = scan.by_digest.at(journal_record(n).digest);
    ASSERT_EQ(answers.size(), 2u);
    for (int k : {0, 1}) {
      const auto read = read_journal_entry(scan, answers[static_cast<std::size_t>(k)]);
      ASSERT_TRUE(read.has_value()) << read.error().message;
      EXPECT_EQ(*read, journal_record(n + 2 * k));
    }
  }
}

TEST(JournalScan, ReadsRecordsLargerThanItsReadBlock) {
  TempDir run;
  fs::create_directories(journal_dir_of(run.path()));
  const auto long_v1 = journal_record(0, std::string(2'500'000, 'a') + "\n");
  append_raw(segment_of(run.path(), 1), v1_line(long_v1));
  const auto long_v2 = journal_record(1, std::string(3'000'000, '\n'));
  {
    auto writer = open_writer(run.path());
    ASSERT_TRUE(writer.append(long_v2).has_value());
    record_all(writer, 2, 4);
  }
  const auto scan = scan_journal(run.path(), {});
  ASSERT_FALSE(scan.problem) << *scan.problem;
  EXPECT_EQ(scan.records, 4u);
  EXPECT_EQ(scan.bytes, fs::file_size(segment_of(run.path(), 1)));
  const auto& evens = scan.by_digest.at(long_v1.digest);
  const auto& odds = scan.by_digest.at(long_v2.digest);
  ASSERT_EQ(evens.size(), 2u);
  ASSERT_EQ(odds.size(), 2u);
  EXPECT_EQ(*read_journal_entry(scan, evens[0]), long_v1);
  EXPECT_EQ(*read_journal_entry(scan, odds[0]), long_v2);
  EXPECT_EQ(*read_journal_entry(scan, odds[1]), journal_record(3));
}

TEST(JournalScan, ReadsEveryRecordWhereverItsReadsEnd) {
  // Records of many lengths, v1 and v2 in turn, over several of the scan's blocks, and scanned
  // again with blocks so small that a header or a v1 line spans many of them.
  TempDir run;
  fs::create_directories(journal_dir_of(run.path()));
  std::vector<JournalRecord> written;
  std::string segment;
  for (int n = 0; segment.size() < 3'200'000; ++n) {
    auto record = journal_record(n);
    record.body = std::string(static_cast<std::size_t>(n * 7919 % 1500), n % 2 ? '\n' : 'b');
    segment += n % 3 ? write_journal_record(record) : v1_line(record);
    written.push_back(std::move(record));
  }
  append_raw(segment_of(run.path(), 1), segment);
  for (const std::size_t block : {std::size_t{1} << 20, std::size_t{61}}) {
    SCOPED_TRACE(block);
    const auto scan = scan_journal(run.path(), {.scan_block = block});
    ASSERT_FALSE(scan.problem) << *scan.problem;
    EXPECT_EQ(scan.records, written.size());
    EXPECT_EQ(scan.bytes, segment.size());
    EXPECT_FALSE(scan.torn_tail_dropped);
    for (int parity : {0, 1}) {
      const auto& answers = scan.by_digest.at(journal_record(parity).digest);
      ASSERT_EQ(answers.size(), (written.size() + 1 - static_cast<std::size_t>(parity)) / 2);
      for (std::size_t k = 0; k < answers.size(); k += 97) {
        const auto read = read_journal_entry(scan, answers[k]);
        ASSERT_TRUE(read.has_value()) << read.error().message;
        EXPECT_EQ(*read, written[2 * k + static_cast<std::size_t>(parity)]);
      }
    }
  }
}

TEST(JournalWriter, RollsOverToANewSegmentWithoutSplittingARecord) {
  TempDir run;
  const auto record_size = write_journal_record(journal_record(0)).size();
  const JournalLimits limits{.max_bytes = 1 << 20, .segment_bytes = 2 * record_size + 10};
  auto writer = open_writer(run.path(), limits);
  record_all(writer, 0, 5);
  ASSERT_TRUE(fs::exists(segment_of(run.path(), 3)));
  EXPECT_FALSE(fs::exists(segment_of(run.path(), 4)));
  for (std::size_t n = 1; n <= 3; ++n) {
    const auto text = file_text(segment_of(run.path(), n));
    EXPECT_LE(text.size(), limits.segment_bytes);
    EXPECT_EQ(text.back(), '\n');
  }

  const auto scan = scan_journal(run.path(), limits);
  ASSERT_FALSE(scan.problem) << *scan.problem;
  EXPECT_EQ(scan.segments.size(), 3u);
  EXPECT_EQ(scan.records, 5u);
  const auto& odds = scan.by_digest.at(journal_record(1).digest);
  ASSERT_EQ(odds.size(), 2u);  // records 1 and 3
  EXPECT_EQ(odds[0].segment, 0u);
  EXPECT_EQ(odds[1].segment, 1u);
  const auto third = read_journal_entry(scan, odds[1]);
  ASSERT_TRUE(third.has_value()) << third.error().message;
  EXPECT_EQ(*third, journal_record(3));
}

TEST(JournalWriter, WritesARecordLargerThanASegmentWhole) {
  TempDir run;
  const JournalLimits limits{.max_bytes = 1 << 20, .segment_bytes = 100};
  auto writer = open_writer(run.path(), limits);
  record_all(writer, 0, 2);
  EXPECT_EQ(file_text(segment_of(run.path(), 1)), write_journal_record(journal_record(0)));
  EXPECT_EQ(file_text(segment_of(run.path(), 2)), write_journal_record(journal_record(1)));
}

TEST(JournalWriter, StopsRecordingAtTheJournalsLimit) {
  TempDir run;
  const auto record_size = write_journal_record(journal_record(0)).size();
  const auto small_record = journal_record(3, "{}");
  const auto small_size = write_journal_record(small_record).size();
  ASSERT_LT(small_size, record_size);
  const JournalLimits limits{.max_bytes = 2 * record_size + small_size};
  auto writer = open_writer(run.path(), limits);
  record_all(writer, 0, 2);
  auto appended = writer.append(journal_record(2));
  ASSERT_TRUE(appended.has_value());
  EXPECT_EQ(*appended, JournalWriter::Appended::over_limit);
  // A smaller record would fit, but recording has stopped.
  appended = writer.append(small_record);
  ASSERT_TRUE(appended.has_value());
  EXPECT_EQ(*appended, JournalWriter::Appended::over_limit);
  EXPECT_EQ(writer.bytes(), 2 * record_size);
  EXPECT_EQ(fs::file_size(segment_of(run.path(), 1)), 2 * record_size);
}

TEST(JournalWriter, StopsRecordingAtTheSegmentsLimit) {
  TempDir run;
  const JournalLimits limits{.max_bytes = 1 << 20, .segment_bytes = 1, .max_segments = 2};
  auto writer = open_writer(run.path(), limits);
  record_all(writer, 0, 2);
  const auto appended = writer.append(journal_record(2));
  ASSERT_TRUE(appended.has_value());
  EXPECT_EQ(*appended, JournalWriter::Appended::over_limit);
  EXPECT_FALSE(fs::exists(segment_of(run.path(), 3)));
}

TEST(JournalWriter, ReturnsAFailedAppendAsAValue) {
  TempDir run;
  auto writer = open_writer(run.path());
  // The writer never appends to a segment it did not make: a file planted where its first
  // segment goes fails the append.
  fs::create_directories(journal_dir_of(run.path()));
  append_raw(segment_of(run.path(), 1), "planted\n");
  const auto appended = writer.append(journal_record(0));
  ASSERT_FALSE(appended.has_value());
  EXPECT_NE(appended.error().message.find("calls-000001.jsonl"), std::string::npos);
  EXPECT_EQ(file_text(segment_of(run.path(), 1)), "planted\n");
}

// ---------------------------------------------------------------- what a child may plant

TEST(JournalScan, ASymlinkedSegmentIsAProblemNotFollowed) {
  TempDir run;
  TempDir elsewhere;
  const auto target = elsewhere.path() / "calls.jsonl";
  append_raw(target, write_journal_record(journal_record(0)));
  fs::create_directories(journal_dir_of(run.path()));
  fs::create_symlink(target, segment_of(run.path(), 1));
  const auto scan = scan_journal(run.path(), {});
  ASSERT_TRUE(scan.problem);
  EXPECT_NE(scan.problem->find("symlink"), std::string::npos);
  EXPECT_EQ(scan.records, 0u);
  EXPECT_FALSE(JournalWriter::open(run.path(), {}, scan).has_value());
}

TEST(JournalScan, ASymlinkedJournalFolderIsAProblemNotFollowed) {
  TempDir run;
  TempDir elsewhere;
  {
    auto writer = open_writer(elsewhere.path());
    record_all(writer, 0, 1);
  }
  fs::create_directories(run.path() / ".inflight");
  fs::create_directory_symlink(journal_dir_of(elsewhere.path()), journal_dir_of(run.path()));
  const auto scan = scan_journal(run.path(), {});
  ASSERT_TRUE(scan.problem);
  EXPECT_EQ(scan.records, 0u);
}

TEST(JournalScan, AnythingButNumberedSegmentsIsAProblem) {
  const auto problem_with = [](const std::function<void(const fs::path& dir)>& plant) {
    TempDir run;
    {
      auto writer = open_writer(run.path());
      record_all(writer, 0, 1);
    }
    plant(journal_dir_of(run.path()));
    const auto scan = scan_journal(run.path(), {});
    EXPECT_TRUE(scan.by_digest.empty());
    return scan.problem.value_or("");
  };
  EXPECT_NE(problem_with([](const fs::path& dir) { append_raw(dir / "notes.txt", "x"); }), "");
  EXPECT_NE(problem_with([](const fs::path& dir) { append_raw(dir / "calls-2.jsonl", ""); }), "");
  EXPECT_NE(problem_with([](const fs::path& dir) {
              append_raw(dir / journal_segment_name(3), write_journal_record(journal_record(1)));
            }).find("calls-000002.jsonl is missing"),
            std::string::npos);
  EXPECT_NE(problem_with([](const fs::path& dir) {
              fs::create_directory(dir / journal_segment_name(2));
            }).find("not a regular file"),
            std::string::npos);
  EXPECT_NE(problem_with(
                [](const fs::path& dir) { ::mkfifo((dir / "calls-000002.jsonl").c_str(), 0644); }),
            "");
}

TEST(JournalScan, ATornLineInAnEarlierSegmentIsAProblem) {
  TempDir run;
  {
    auto writer = open_writer(run.path());
    record_all(writer, 0, 1);
  }
  append_raw(segment_of(run.path(), 1), "{\"v\":");
  append_raw(segment_of(run.path(), 2), write_journal_record(journal_record(1)));
  const auto scan = scan_journal(run.path(), {});
  ASSERT_TRUE(scan.problem);
  EXPECT_NE(scan.problem->find("without a newline"), std::string::npos);
}

TEST(JournalScan, AJournalOverItsLimitIsAProblem) {
  TempDir run;
  {
    auto writer = open_writer(run.path());
    record_all(writer, 0, 3);
  }
  const auto size = fs::file_size(segment_of(run.path(), 1));
  EXPECT_FALSE(scan_journal(run.path(), {.max_bytes = size}).problem);
  const auto scan = scan_journal(run.path(), {.max_bytes = size - 1});
  ASSERT_TRUE(scan.problem);
  EXPECT_NE(scan.problem->find("larger than"), std::string::npos);
}

TEST(JournalScan, ReadsNoEntryItDoesNotHold) {
  TempDir run;
  {
    auto writer = open_writer(run.path());
    record_all(writer, 0, 1);
  }
  const auto scan = scan_journal(run.path(), {});
  EXPECT_FALSE(read_journal_entry(scan, {.segment = 1, .offset = 0, .length = 10}).has_value());
  EXPECT_FALSE(read_journal_entry(scan, {.segment = 0, .offset = 0, .length = 0}).has_value());
  // An entry that no longer lies on a whole record (the file changed since the scan).
  const auto& entry = scan.by_digest.begin()->second.front();
  EXPECT_FALSE(
      read_journal_entry(scan, {.segment = 0, .offset = 1, .length = entry.length}).has_value());
  EXPECT_TRUE(read_journal_entry(scan, entry).has_value());
}

}  // namespace
}  // namespace inflight::models
