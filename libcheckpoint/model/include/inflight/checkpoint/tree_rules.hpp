// What a checkpoint tree may hold, in one place for both of its readers: the
// snapshot walk leaves out an entry that breaks a rule (and fails a run dir
// that is still over a limit), and a restore refuses a branch that breaks one
// (docs/checkpoints.md "What a checkpoint saves, a restore takes"). Applying the same rules when a
// checkpoint is made is what makes every checkpoint that lands restorable. No libgit2 here: each
// side maps its own view of an entry (lstat, a tree entry's mode) to EntryKind.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inflight::checkpoint {

// How much a tree may hold (docs/checkpoints.md "What a checkpoint saves, a restore takes":
// --restore-max-bytes and --restore-max-files; directories count as files).
struct TreeLimits {
  std::uint64_t max_bytes = 1ull << 30;
  std::uint64_t max_files = 100000;
};

// Deeper directories are not run dirs; the limit also bounds both walks.
inline constexpr int kMaxTreeDepth = 64;

enum class EntryKind { file, directory, symlink, gitlink, fifo, socket, device, other };

// The kind lstat's st_mode describes.
EntryKind entry_kind_of_mode(mode_t mode);

// The longest name a Linux file system holds (NAME_MAX).
inline constexpr std::size_t kMaxNameBytes = 255;

// Why an entry may not have this name (empty, '.', '..', a '/', '.git' in
// any case, not UTF-8, longer than kMaxNameBytes), or nullopt when it may.
std::optional<std::string> name_refusal(std::string_view name);
// Why an entry of this kind cannot be kept; nullopt for files and directories.
std::optional<std::string> kind_refusal(EntryKind kind);
// Why a directory `depth` levels down (1: in the tree's root) cannot be kept.
std::optional<std::string> depth_refusal(int depth);
// Why one file of `size` bytes cannot be kept: alone it is over the tree's.
std::optional<std::string> file_size_refusal(std::uint64_t size, const TreeLimits& limits);

// What a tree holds so far, against its limits. Every file and directory
// counts once toward the file limit (a chunked file is one file: its chunk
// tree and chunk blobs do not count); bytes are the files' contents.
class TreeTally {
 public:
  explicit TreeTally(const TreeLimits& limits) : limits_(limits) {}

  void add_entry() { ++entries_; }
  void add_bytes(std::uint64_t bytes) { bytes_ += bytes; }
  // Why the tree is over a limit now, or nullopt.
  std::optional<std::string> over_limit() const;

 private:
  TreeLimits limits_;
  std::uint64_t entries_ = 0;
  std::uint64_t bytes_ = 0;
};

// An entry a snapshot left out: its path in the run dir, shown with printable()
// (names may not be UTF-8), and the rule it breaks.
struct LeftOutEntry {
  std::string path;
  std::string rule;
  bool operator==(const LeftOutEntry&) const = default;
};

// The entries one snapshot left out: the first kMaxNamedLeftOut by name, and
// how many more there were, so that a child making a million FIFOs costs a
// bounded answer.
struct LeftOut {
  static constexpr std::size_t kMaxNamedLeftOut = 100;
  std::vector<LeftOutEntry> named;
  std::uint64_t unnamed = 0;

  void add(std::string_view path, std::string rule);
  bool empty() const { return named.empty() && unnamed == 0; }
};

}  // namespace inflight::checkpoint
