// See model_journal.hpp: the journal's line format, its scan and its writer.
#include "inflight/supervisor/models/model_journal.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "inflight/core/bounded_json.hpp"
#include "inflight/core/run_dir.hpp"

namespace inflight::models {

namespace {

using JournalJson = nlohmann::ordered_json;

// A line is one object holding one object ("usage"): deeper is not ours.
constexpr int kJournalLineDepth = 4;
// Reads of a segment, a block at a time: a record's line may span blocks.
constexpr std::size_t kJournalReadBlock = 1 << 20;
constexpr std::string_view kSegmentPrefix = "calls-";
constexpr std::string_view kSegmentSuffix = ".jsonl";
constexpr std::size_t kSegmentDigits = 6;

constexpr std::string_view kBase64Alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

Error journal_error(std::string message) {
  return Error{.kind = Failure::other, .message = std::move(message), .candidates = {}};
}

// An Error naming what failed and errno's words for why.
Error journal_errno_error(const std::string& what) {
  return journal_error(what + ": " + std::strerror(errno));
}

std::string journal_base64(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t group = 0;
    for (std::size_t k = 0; k < 3; ++k)
      group = group << 8 | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (std::size_t k = 0; k < 4; ++k)
      out += k <= n ? kBase64Alphabet[(group >> (18 - 6 * k)) & 0x3f] : '=';
  }
  return out;
}

// The bytes of padded base64 text, or nullopt for anything journal_base64 would not write.
std::optional<std::string> journal_unbase64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const std::size_t padding = !last ? 0 : text[i + 3] != '=' ? 0 : text[i + 2] != '=' ? 1 : 2;
    std::uint32_t group = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const auto value = k < 4 - padding ? kBase64Alphabet.find(text[i + k]) : 0;
      if (value == std::string_view::npos) return std::nullopt;
      group = group << 6 | static_cast<std::uint32_t>(value);
    }
    for (std::size_t k = 0; k < 3 - padding; ++k)
      out += static_cast<char>((group >> (16 - 8 * k)) & 0xff);
  }
  return out;
}

bool is_request_digest(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

JournalJson optional_count_json(const std::optional<std::uint64_t>& count) {
  return count ? JournalJson(*count) : JournalJson(nullptr);
}

// The reader's view of a line's object: each field checked, the first problem kept with its
// name, so that a bad line is refused whole.
class JournalFields {
 public:
  explicit JournalFields(const JournalJson& json) : json_(json) {}

  std::string text(const char* key) {
    const auto it = json_.find(key);
    if (it == json_.end() || !it->is_string()) {
      fail(key, "is not a string");
      return {};
    }
    return it->get<std::string>();
  }
  std::uint64_t count(const char* key) { return optional_count(json_, key, true).value_or(0); }
  int number(const char* key, int low, int high) {
    const auto value = count(key);
    if (value < static_cast<std::uint64_t>(low) || value > static_cast<std::uint64_t>(high)) {
      fail(key, "is not between " + std::to_string(low) + " and " + std::to_string(high));
      return 0;
    }
    return static_cast<int>(value);
  }
  bool flag(const char* key) {
    const auto it = json_.find(key);
    if (it == json_.end() || !it->is_boolean()) {
      fail(key, "is not true or false");
      return false;
    }
    return it->get<bool>();
  }
  Usage usage() {
    const auto it = json_.find("usage");
    if (it == json_.end() || !it->is_object()) {
      fail("usage", "is not an object");
      return {};
    }
    return {.input = optional_count(*it, "input", false),
            .output = optional_count(*it, "output", false)};
  }
  std::string body();
  void fail(const std::string& key, const std::string& why) {
    if (!problem_) problem_ = key + " " + why;
  }
  const std::optional<std::string>& problem() const { return problem_; }

 private:
  // A whole number at `key` of `json`; null is nullopt unless `required`.
  std::optional<std::uint64_t> optional_count(const JournalJson& json, const char* key,
                                              bool required) {
    const auto it = json.find(key);
    if (!required && it != json.end() && it->is_null()) return std::nullopt;
    if (it == json.end() || !it->is_number_unsigned()) {
      fail(key, required ? "is not a whole number" : "is not a whole number or null");
      return std::nullopt;
    }
    return it->get<std::uint64_t>();
  }

  const JournalJson& json_;
  std::optional<std::string> problem_;
};

// Exactly one of "body" (UTF-8 text) and "body_base64".
std::string JournalFields::body() {
  const bool text_form = json_.contains("body");
  if (text_form == json_.contains("body_base64")) {
    fail("body", "needs exactly one of body and body_base64");
    return {};
  }
  if (text_form) return text("body");
  auto bytes = journal_unbase64(text("body_base64"));
  if (!bytes) fail("body_base64", "is not base64");
  return bytes.value_or("");
}

std::optional<std::size_t> parse_segment_number(std::string_view name) {
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

// The numbers of the segments in the journal's folder, unsorted; an Error for any other name,
// or for more than the limit.
Result<std::vector<std::size_t>> list_segment_numbers(int dir, const JournalLimits& limits) {
  const int listed = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  std::unique_ptr<DIR, int (*)(DIR*)> listing(listed < 0 ? nullptr : ::fdopendir(listed),
                                              ::closedir);
  if (!listing) {
    if (listed >= 0) ::close(listed);
    return journal_errno_error(std::string("cannot list ") + kJournalDir);
  }
  std::vector<std::size_t> numbers;
  for (;;) {
    errno = 0;  // readdir's end and its failure differ only by errno
    const dirent* entry = ::readdir(listing.get());
    if (entry == nullptr) break;
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    const auto number = parse_segment_number(name);
    if (!number) return journal_error(printable(name) + " is not a segment of the journal");
    if (numbers.size() == limits.max_segments)
      return journal_error("more than " + std::to_string(limits.max_segments) + " segments");
    numbers.push_back(*number);
  }
  if (errno != 0) return journal_errno_error(std::string("cannot list ") + kJournalDir);
  return numbers;
}

// The number of segments in the journal's folder, numbered 1..N without a gap; nullopt and the
// scan's problem set when anything else is there.
std::optional<std::size_t> count_segments(int dir, const JournalLimits& limits, JournalScan& scan) {
  auto numbers = list_segment_numbers(dir, limits);
  if (!numbers) {
    scan.problem = numbers.error().message;
    return std::nullopt;
  }
  std::sort(numbers->begin(), numbers->end());
  for (std::size_t i = 0; i < numbers->size(); ++i) {
    if ((*numbers)[i] == i + 1) continue;
    scan.problem = journal_segment_name(i + 1) + " is missing";
    return std::nullopt;
  }
  return numbers->size();
}

// Calls `take(offset, line)` for each line of the first `size` bytes of `fd` that ends in '\n'
// (included in `line`), until it returns false. The bytes after the last '\n' (a torn tail) are
// counted, and kept only while they may still turn out to be a line.
using TakeLine = std::function<bool(std::uint64_t offset, std::string_view line)>;
Result<std::uint64_t> for_each_journal_line(int fd, std::uint64_t size, const TakeLine& take) {
  std::string block(std::min<std::uint64_t>(size, kJournalReadBlock), '\0');
  std::string pending;  // a line begun in an earlier block
  std::uint64_t at = 0;
  while (at < size) {
    const ssize_t n = ::pread(fd, block.data(), std::min<std::uint64_t>(block.size(), size - at),
                              static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return journal_errno_error("read");
    if (n == 0) return journal_error("shorter than it was a moment ago");
    const std::string_view read(block.data(), static_cast<std::size_t>(n));
    std::size_t from = 0;
    for (auto newline = read.find('\n'); newline != std::string_view::npos;
         newline = read.find('\n', from)) {
      const auto piece = read.substr(from, newline + 1 - from);
      const std::uint64_t start = at + from - pending.size();
      const bool whole = pending.empty();
      if (!whole) pending.append(piece);
      if (!take(start, whole ? piece : std::string_view(pending))) return std::uint64_t{0};
      pending.clear();
      from = newline + 1;
    }
    pending.append(read.substr(from));
    at += static_cast<std::uint64_t>(n);
  }
  return static_cast<std::uint64_t>(pending.size());
}

struct SegmentToRead {
  Fd fd;
  std::uint64_t size = 0;
};

// A segment opened to be read: a regular file, not reached through a symlink, and never a FIFO
// that would hold the scan.
Result<SegmentToRead> open_segment_to_read(int dir, const std::string& name) {
  Fd fd(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!fd && errno == ELOOP) return journal_error(name + " is a symlink");
  if (!fd || ::fstat(fd.get(), &st) != 0) return journal_errno_error(name);
  if (!S_ISREG(st.st_mode)) return journal_error(name + " is not a regular file");
  return SegmentToRead{.fd = std::move(fd), .size = static_cast<std::uint64_t>(st.st_size)};
}

// Where the scan stands in the segment it reads.
struct SegmentInScan {
  std::string name;
  std::size_t index = 0;  // in JournalScan::segments
  bool last = false;
  std::uint64_t size = 0;
  std::uint64_t end = 0;  // of the last record kept
};

// One line of a segment into the scan: its record indexed, or the torn last line dropped;
// false, with the scan's problem set, for a bad line anywhere else.
bool take_journal_line(JournalScan& scan, SegmentInScan& segment, std::uint64_t offset,
                       std::string_view line) {
  const auto record = parse_journal_line(line);
  if (!record && segment.last && offset + line.size() == segment.size) {
    scan.torn_tail_dropped = true;
    return true;
  }
  if (!record) {
    scan.problem =
        segment.name + " at byte " + std::to_string(offset) + ": " + record.error().message;
    return false;
  }
  scan.by_digest[record->digest].push_back(
      {.segment = segment.index, .offset = offset, .length = line.size()});
  ++scan.records;
  scan.bytes += line.size();
  segment.end = offset + line.size();
  return true;
}

// Reads one segment into the scan; sets its problem at the first thing wrong.
void scan_segment(int dir, std::size_t number, bool last, const JournalLimits& limits,
                  JournalScan& scan) {
  SegmentInScan segment{.name = journal_segment_name(number), .index = number - 1, .last = last};
  const auto opened = open_segment_to_read(dir, segment.name);
  if (!opened) {
    scan.problem = opened.error().message;
    return;
  }
  segment.size = opened->size;
  if (scan.bytes + segment.size > limits.max_bytes) {
    scan.problem = "the journal is larger than " + std::to_string(limits.max_bytes) + " bytes";
    return;
  }
  const auto tail = for_each_journal_line(opened->fd.get(), segment.size,
                                          [&](std::uint64_t offset, std::string_view line) {
                                            return take_journal_line(scan, segment, offset, line);
                                          });
  if (!tail) scan.problem = segment.name + ": " + tail.error().message;
  if (scan.problem) return;
  if (*tail > 0 && !last) scan.problem = segment.name + " ends without a newline";
  if (*tail > 0 && last) scan.torn_tail_dropped = true;
  if (last) scan.last_segment_end = segment.end;
}

// The journal's folder under `run_dir`, made when missing, each level opened without following
// a symlink a child may have put in its place.
Result<Fd> make_journal_dir(const std::filesystem::path& run_dir) {
  Fd dir(::open(run_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) return journal_errno_error("open " + run_dir.string());
  for (const auto& part : std::filesystem::path(kJournalDir)) {
    if (::mkdirat(dir.get(), part.c_str(), 0755) != 0 && errno != EEXIST)
      return journal_errno_error("create " + part.string() + " in " + run_dir.string());
    dir = Fd(::openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dir) return journal_errno_error("open " + part.string() + " in " + run_dir.string());
  }
  return dir;
}

}  // namespace

std::string journal_segment_name(std::size_t number) {
  std::string digits = std::to_string(number);
  if (digits.size() < kSegmentDigits) digits.insert(0, kSegmentDigits - digits.size(), '0');
  return std::string(kSegmentPrefix) + digits + std::string(kSegmentSuffix);
}

std::string write_journal_line(const JournalRecord& record) {
  JournalJson json{{"v", 1},
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
                   {"usage",
                    {{"input", optional_count_json(record.usage.input)},
                     {"output", optional_count_json(record.usage.output)}}}};
  if (is_valid_utf8(record.body))
    json["body"] = record.body;
  else
    json["body_base64"] = journal_base64(record.body);
  return json.dump(-1, ' ', false, JournalJson::error_handler_t::replace) + '\n';
}

Result<JournalRecord> parse_journal_line(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  const auto json =
      parse_bounded_json(line, {.max_bytes = line.size(), .max_depth = kJournalLineDepth});
  if (!json) return journal_error("a journal line is " + json.error().message);
  if (!json->is_object()) return journal_error("a journal line is not an object");
  JournalFields fields(*json);
  if (fields.count("v") != 1) fields.fail("v", "is not 1");
  JournalRecord record{.digest = fields.text("digest"),
                       .model = fields.text("model"),
                       .method = fields.text("method"),
                       .path = fields.text("path"),
                       .attempt = fields.number("attempt", 0, INT_MAX),
                       .status = fields.number("status", 100, 999),
                       .content_type = fields.text("content_type"),
                       .stream = fields.flag("stream"),
                       .body = fields.body(),
                       .started_at = fields.text("started_at"),
                       .ms = fields.count("ms"),
                       .usage = fields.usage()};
  if (!fields.problem() && !is_request_digest(record.digest))
    fields.fail("digest", "is not 64 lower-case hex digits");
  if (fields.problem()) return journal_error("a journal line's " + *fields.problem());
  return record;
}

JournalScan scan_journal(const std::filesystem::path& run_dir, const JournalLimits& limits) {
  JournalScan scan;
  scan.run_dir = run_dir;
  const Fd dir = checkpoint::open_in_run_dir(run_dir, kJournalDir, O_RDONLY | O_DIRECTORY);
  if (!dir) {
    if (errno != ENOENT)
      scan.problem = std::string("cannot open ") + kJournalDir + ": " + std::strerror(errno);
    return scan;
  }
  const auto count = count_segments(dir.get(), limits, scan);
  for (std::size_t number = 1; count && number <= *count && !scan.problem; ++number) {
    scan.segments.push_back(run_dir / kJournalDir / journal_segment_name(number));
    scan_segment(dir.get(), number, number == *count, limits, scan);
  }
  if (scan.problem) scan.by_digest.clear();
  return scan;
}

Result<JournalRecord> read_journal_entry(const JournalScan& scan, const JournalEntry& entry) {
  if (entry.segment >= scan.segments.size() || entry.length == 0 || entry.length > scan.bytes)
    return journal_error("no such entry in the journal");
  const auto name = scan.segments[entry.segment].filename();
  const Fd fd = checkpoint::open_in_run_dir(scan.run_dir, std::filesystem::path(kJournalDir) / name,
                                            O_RDONLY | O_NONBLOCK);
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0) return journal_errno_error("open " + name.string());
  if (!S_ISREG(st.st_mode)) return journal_error(name.string() + " is not a regular file");
  std::string line(entry.length, '\0');
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::pread(fd.get(), line.data() + done, line.size() - done,
                              static_cast<off_t>(entry.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return journal_errno_error("read " + name.string());
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  if (done < line.size() || line.back() != '\n')
    return journal_error(name.string() + " changed since it was scanned");
  return parse_journal_line(line);
}

Result<JournalWriter> JournalWriter::open(const std::filesystem::path& run_dir,
                                          JournalLimits limits, const JournalScan& scan) {
  if (scan.problem)
    return journal_error("the model-call journal cannot be read back: " + *scan.problem);
  auto dir = make_journal_dir(run_dir);
  if (!dir) return dir.error();
  JournalWriter writer(std::move(*dir), limits);
  writer.bytes_ = scan.bytes;
  if (!scan.segments.empty()) {
    const auto resumed = writer.resume_segment(scan.segments.size(), scan.last_segment_end);
    if (!resumed) return resumed.error();
  }
  return writer;
}

// Opens the last segment to append to it, cut to the end of its last record.
Result<void> JournalWriter::resume_segment(std::size_t number, std::uint64_t end) {
  const auto name = journal_segment_name(number);
  Fd fd(::openat(dir_.get(), name.c_str(),
                 O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0) return journal_errno_error("open " + name);
  if (!S_ISREG(st.st_mode)) return journal_error(name + " is not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) < end)
    return journal_error(name + " is shorter than when it was scanned");
  if (static_cast<std::uint64_t>(st.st_size) > end &&
      ::ftruncate(fd.get(), static_cast<off_t>(end)) != 0)
    return journal_errno_error("cut the torn tail of " + name);
  segment_ = std::move(fd);
  segment_number_ = number;
  segment_size_ = end;
  return {};
}

// A new segment, never one that is already there (a child's file is not ours to append to).
Result<void> JournalWriter::start_segment(std::size_t number) {
  const auto name = journal_segment_name(number);
  Fd fd(::openat(dir_.get(), name.c_str(),
                 O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd) return journal_errno_error("create " + name);
  segment_ = std::move(fd);
  segment_number_ = number;
  segment_size_ = 0;
  return {};
}

Result<JournalWriter::Appended> JournalWriter::append(const JournalRecord& record) {
  if (broken_) return *broken_;
  if (stopped_) return Appended::over_limit;
  const auto line = write_journal_line(record);
  if (bytes_ + line.size() > limits_.max_bytes) {
    stopped_ = true;
    return Appended::over_limit;
  }
  if (!segment_ || (segment_size_ > 0 && segment_size_ + line.size() > limits_.segment_bytes)) {
    if (segment_number_ >= limits_.max_segments) {
      stopped_ = true;
      return Appended::over_limit;
    }
    const auto started = start_segment(segment_number_ + 1);
    if (!started) return started.error();
  }
  const auto written = write_line(line);
  if (!written) return written.error();
  return Appended::recorded;
}

// One write(2) of the whole line; should it fall short, the rest follows, and should it fail,
// what it wrote is cut off so that the segment still ends with a whole line.
Result<void> JournalWriter::write_line(std::string_view line) {
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(segment_.get(), line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      auto failed = journal_errno_error("append to " + journal_segment_name(segment_number_));
      if (done > 0 && ::ftruncate(segment_.get(), static_cast<off_t>(segment_size_)) != 0)
        broken_ =
            journal_errno_error("cut a torn line of " + journal_segment_name(segment_number_));
      return failed;
    }
    done += static_cast<std::size_t>(n);
  }
  segment_size_ += line.size();
  bytes_ += line.size();
  return {};
}

}  // namespace inflight::models
