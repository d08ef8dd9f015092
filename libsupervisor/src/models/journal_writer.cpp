// See model_journal.hpp: appends a run's answers to its journal, a segment
// after another, each record whole.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inflight/supervisor/models/model_journal.hpp"
#include "journal_files.hpp"

namespace inflight::models {

namespace {

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
  const auto bytes = write_journal_record(record);
  if (bytes_ + bytes.size() > limits_.max_bytes) {
    stopped_ = true;
    return Appended::over_limit;
  }
  if (!segment_ || (segment_size_ > 0 && segment_size_ + bytes.size() > limits_.segment_bytes)) {
    if (segment_number_ >= limits_.max_segments) {
      stopped_ = true;
      return Appended::over_limit;
    }
    const auto started = start_segment(segment_number_ + 1);
    if (!started) return started.error();
  }
  const auto written = write_record(bytes);
  if (!written) return written.error();
  return Appended::recorded;
}

// One write(2) of the whole record; should it fall short, the rest follows, and should it fail,
// what it wrote is cut off so that the segment still ends with a whole record.
Result<void> JournalWriter::write_record(std::string_view record) {
  std::size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = ::write(segment_.get(), record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      auto failed = journal_errno_error("append to " + journal_segment_name(segment_number_));
      if (done > 0 && ::ftruncate(segment_.get(), static_cast<off_t>(segment_size_)) != 0)
        broken_ =
            journal_errno_error("cut a torn record of " + journal_segment_name(segment_number_));
      return failed;
    }
    done += static_cast<std::size_t>(n);
  }
  segment_size_ += record.size();
  bytes_ += record.size();
  return {};
}

}  // namespace inflight::models
