// The model-call journal's on-disk format (SPEC §13 "The journal"), its writer and its reader
// side by side: every answered call of a run is one record in `.inflight/model-calls/` of its
// run dir, checkpointed, restored and published with the run, and read back by a later attempt
// to replay answers. The run dir is the child's to write, so everything read back is checked, a
// symlink is never followed, and the reader is bounded; the journal holds no header at all, so
// no key or token can end up in it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "inflight/core/failure.hpp"
#include "inflight/core/fd.hpp"
#include "inflight/supervisor/models/model_answer.hpp"

namespace inflight::models {

inline constexpr const char* kJournalDir = ".inflight/model-calls";  // under the run dir

// One answered call. Never holds a key, a token, an Authorization or x-api-key header: it has
// no field for headers at all.
struct JournalRecord {
  std::string digest;  // request_digest
  std::string model, method, path;
  int attempt = 0;
  int status = 0;
  std::string content_type;
  bool stream = false;
  std::string body;        // the bytes as the child got them (a stream's events in order)
  std::string started_at;  // ISO 8601 UTC
  std::uint64_t ms = 0;
  Usage usage;

  bool operator==(const JournalRecord&) const = default;
};

// One record: a header line, JSON with "v":2 and every field but the body, ending in
// "body_bytes":N; then the body's N bytes as they are; then '\n'. Usage as
// "usage":{"input":N|null,"output":N|null}. Text fields that are not UTF-8 (a path a child sent)
// are written with U+FFFD in place of the bad bytes: the digest, not they, is the identity.
std::string write_journal_record(const JournalRecord& record);

// A record's first line read, its '\n' optional. A v2 header gives its record without the body,
// and `bytes_after_line` counts the body and its '\n'. A v1 line (written by
// inflight before the journal's v2) holds a whole record, its body JSON text in "body", or base64
// in "body_base64" when not UTF-8; nothing follows it.
struct JournalLine {
  JournalRecord record;
  std::uint64_t bytes_after_line = 0;
};
Result<JournalLine> parse_journal_line(std::string_view line);
// A whole record of either version, or an Error whose message names what is wrong.
Result<JournalRecord> parse_journal_record(std::string_view bytes);

// "calls-000001.jsonl" for 1: the name of the journal's segment `number` (from 1).
std::string journal_segment_name(std::size_t number);

struct JournalLimits {
  std::uint64_t max_bytes = 256ull << 20;    // the whole journal of a run
  std::uint64_t segment_bytes = 8ull << 20;  // a segment rolls over past this (a record is never
                                             // split)
  // Segments at most: the writer stops recording beyond it, and a scan that finds more files
  // stops there, so that a folder filled by a child costs a bounded listing.
  std::size_t max_segments = 4096;
  // A scan reads a segment this many bytes at a time (more for a v1 line that is longer).
  std::size_t scan_block = 1 << 20;
};

// Where a record lies, so that a replay reads it from disk rather than holding every answer in
// memory. `length` counts the record's last '\n'.
struct JournalEntry {
  std::size_t segment = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;

  bool operator==(const JournalEntry&) const = default;
};

struct JournalScan {
  std::filesystem::path run_dir;                               // what was scanned
  std::vector<std::filesystem::path> segments;                 // in order
  std::map<std::string, std::vector<JournalEntry>> by_digest;  // each digest's answers in order
  std::uint64_t bytes = 0;  // of the records kept: a dropped torn tail does not count
  std::size_t records = 0;
  bool torn_tail_dropped = false;
  // Where the last segment's last record kept ends: the writer cuts the rest.
  std::uint64_t last_segment_end = 0;
  // Set when anything but a torn last record is unreadable (a bad record, a segment that is not a
  // regular file, a name that does not parse, a gap in the numbers, over the limits): then
  // nothing is replayed for the run (by_digest is left empty), the caller warns.
  std::optional<std::string> problem;
};

// Reads .inflight/model-calls/ of `run_dir` (absent: an empty scan). Segments are files named
// calls-NNNNNN.jsonl (6 digits, from 000001, no gap), read in order; anything else in the folder
// is a problem. A torn last record (cut short, or unreadable up to the end) of the LAST segment is
// dropped. A body is skipped, not read: its bytes may be anything. Opens
// with O_NOFOLLOW at every component (a symlink planted by a child is a problem, not followed),
// bounded by `limits.max_bytes` overall (more is a problem). Runs off the event loop, plain
// blocking I/O.
JournalScan scan_journal(const std::filesystem::path& run_dir, const JournalLimits& limits);
// The record `entry` of `scan` points to, read again from its segment (pread of its bytes) and
// parsed. The run dir may have changed since the scan: the caller checks the digest is the one
// it looked up.
Result<JournalRecord> read_journal_entry(const JournalScan& scan, const JournalEntry& entry);

// Appends records to a run's journal, the segments as above. On open, a torn tail of the last
// segment is cut off (everything after the scan's last record kept) so that the next record starts
// clean. append() refuses once the journal would go over max_bytes or max_segments, and from
// then on: recording stops, calls go on (the caller logs that once). Each append is one write(2)
// of the whole record (O_APPEND; a failed write is cut off again), no fsync: the checkpoint picks
// it up. Failures (ENOSPC, EACCES) are values, never exceptions out of append.
class JournalWriter {
 public:
  // Refuses a scan with a problem: appending to a journal that cannot be read back would only
  // make it longer.
  static Result<JournalWriter> open(const std::filesystem::path& run_dir, JournalLimits limits,
                                    const JournalScan& scan);

  enum class Appended { recorded, over_limit };
  Result<Appended> append(const JournalRecord& record);
  // The journal's size: what was kept at open and every record appended since.
  std::uint64_t bytes() const { return bytes_; }

 private:
  JournalWriter(Fd dir, JournalLimits limits) : dir_(std::move(dir)), limits_(limits) {}
  Result<void> resume_segment(std::size_t number, std::uint64_t end);
  Result<void> start_segment(std::size_t number);
  Result<void> write_record(std::string_view record);

  Fd dir_;  // .inflight/model-calls, opened without following a symlink
  JournalLimits limits_;
  Fd segment_;
  std::size_t segment_number_ = 0;  // 0 before the first segment
  std::uint64_t segment_size_ = 0;
  std::uint64_t bytes_ = 0;
  bool stopped_ = false;
  std::optional<Error> broken_;  // a failed write that could not be cut off
};

}  // namespace inflight::models
