// See model_journal.hpp: reads a run's journal, segment by segment, into the
// index a replay looks answers up in, and reads one answer back.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <memory>

#include "inflight/core/bounded_json.hpp"
#include "inflight/core/run_dir.hpp"
#include "inflight/supervisor/models/model_journal.hpp"
#include "journal_files.hpp"

namespace inflight::models {

namespace {

// Reads of a segment, a block at a time: a record's line may span blocks.
constexpr std::size_t kJournalReadBlock = 1 << 20;

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

}  // namespace inflight::models
