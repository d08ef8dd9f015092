// See model_journal.hpp: reads a run's journal, segment by segment, into the
// index a replay looks answers up in, and reads one answer back.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "inflight/core/bounded_json.hpp"
#include "inflight/core/run_dir.hpp"
#include "inflight/supervisor/models/model_journal.hpp"
#include "journal_files.hpp"

namespace inflight::models {

namespace {

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

// Up to `length` bytes at `offset` of `fd`: fewer only where the file ends.
Result<std::size_t> pread_fully(int fd, std::uint64_t offset, char* into, std::size_t length) {
  std::size_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, into + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return journal_errno_error("read");
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

// A segment read through a window of it, `block` bytes at a time: a header line is found without
// a read(2) of its own, and a body is skipped without being read. A v1 line may span blocks.
class SegmentReader {
 public:
  SegmentReader(int fd, std::uint64_t size, std::size_t block)
      : fd_(fd), size_(size), block_(std::max<std::size_t>(block, 1)) {}

  // The line at `offset`, its '\n' included; nullopt when the segment ends first. The view lives
  // until the next call.
  using Line = std::optional<std::string_view>;
  Result<Line> line_at(std::uint64_t offset) {
    if (offset < start_ || offset > window_end()) {
      window_.clear();
      start_ = offset;
    }
    std::uint64_t searched_to = offset;  // the bytes from `offset` to here hold no '\n'
    for (;;) {
      const auto newline = window_.find('\n', searched_to - start_);
      if (newline != std::string::npos)
        return Line(
            std::string_view(window_).substr(offset - start_, start_ + newline + 1 - offset));
      searched_to = window_end();
      const auto more = read_more(offset);
      if (!more) return more.error();
      if (!*more) return Line();
    }
  }

  // The byte at `offset`, read alone when the window does not hold it (the end of a long body);
  // nullopt past the segment's end.
  Result<std::optional<char>> byte_at(std::uint64_t offset) {
    if (offset >= size_) return std::optional<char>();
    if (offset >= start_ && offset < window_end()) return std::optional(window_[offset - start_]);
    char byte = 0;
    const auto read = read_at(offset, &byte, 1);
    if (!read) return read.error();
    return std::optional(byte);
  }

 private:
  std::uint64_t window_end() const { return start_ + window_.size(); }

  // Appends the next block to the window, first dropping what lies before `keep_from`; false at
  // the segment's end.
  Result<bool> read_more(std::uint64_t keep_from) {
    const std::uint64_t end = window_end();
    if (end >= size_) return false;
    window_.erase(0, keep_from - start_);
    start_ = keep_from;
    const std::size_t had = window_.size();
    window_.resize(had + std::min<std::uint64_t>(block_, size_ - end));
    const auto read = read_at(end, window_.data() + had, window_.size() - had);
    if (!read) return read.error();
    return true;
  }

  // `length` bytes at `offset`, which the segment's size at the scan's start says are there.
  Result<void> read_at(std::uint64_t offset, char* into, std::size_t length) {
    const auto read = pread_fully(fd_, offset, into, length);
    if (!read) return read.error();
    if (*read < length) return journal_error("shorter than it was a moment ago");
    return {};
  }

  int fd_;
  std::uint64_t size_;
  std::size_t block_;
  std::uint64_t start_ = 0;  // the window holds the segment's bytes from here
  std::string window_;
};

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

// The record at `offset` of a segment into the scan: indexed, or a torn last record dropped;
// false once the segment's records end, or, with the scan's problem set, at a bad record. A v2
// record's body is skipped, only the '\n' after it checked.
bool take_journal_record(JournalScan& scan, SegmentReader& reader, SegmentInScan& segment,
                         std::uint64_t offset) {
  const auto line = reader.line_at(offset);
  if (!line) {
    scan.problem = segment.name + ": " + line.error().message;
    return false;
  }
  if (!*line) {  // bytes without a '\n' up to the end
    if (segment.last)
      scan.torn_tail_dropped = true;
    else
      scan.problem = segment.name + " ends without a newline";
    return false;
  }
  const std::uint64_t line_end = offset + (*line)->size();
  auto header = parse_journal_line(**line);
  const std::uint64_t end = header ? line_end + header->bytes_after_line : line_end;
  if (header && end > line_end) {
    const auto last = reader.byte_at(end - 1);
    if (!last) {
      scan.problem = segment.name + ": " + last.error().message;
      return false;
    }
    if (!*last || **last != '\n')
      header = journal_error("a journal record's body ends without a newline");
  }
  // A record unreadable up to the last segment's end may be the prefix of one that a pod's death
  // cut short, or the zeros a crash can leave after it: it is dropped, and the writer cuts it off.
  // A header whose body_bytes a child inflated looks the same and swallows the records after it;
  // nothing tells the two apart.
  if (!header && segment.last && end >= segment.size) {
    scan.torn_tail_dropped = true;
    return false;
  }
  if (!header) {
    scan.problem =
        segment.name + " at byte " + std::to_string(offset) + ": " + header.error().message;
    return false;
  }
  scan.by_digest[header->record.digest].push_back(
      {.segment = segment.index, .offset = offset, .length = end - offset});
  ++scan.records;
  scan.bytes += end - offset;
  segment.end = end;
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
  SegmentReader reader(opened->fd.get(), segment.size, limits.scan_block);
  while (segment.end < segment.size && take_journal_record(scan, reader, segment, segment.end)) {
  }
  if (last && !scan.problem) scan.last_segment_end = segment.end;
}

}  // namespace

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
  std::string bytes(entry.length, '\0');
  const auto done = pread_fully(fd.get(), entry.offset, bytes.data(), bytes.size());
  if (!done) return journal_error(name.string() + ": " + done.error().message);
  if (*done < bytes.size() || bytes.back() != '\n')
    return journal_error(name.string() + " changed since it was scanned");
  return parse_journal_record(bytes);
}

}  // namespace inflight::models
