// The rules of tree_rules.hpp, with the words both the snapshot's warnings and
// a restore's refusals use.
#include "inflight/checkpoint/tree_rules.hpp"

#include <sys/stat.h>

#include <cctype>

#include "inflight/core/bounded_json.hpp"

namespace inflight::checkpoint {

namespace {

bool equals_ignoring_case(std::string_view a, std::string_view lower) {
  if (a.size() != lower.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != lower[i]) return false;
  }
  return true;
}

}  // namespace

EntryKind entry_kind_of_mode(mode_t mode) {
  if (S_ISREG(mode)) return EntryKind::file;
  if (S_ISDIR(mode)) return EntryKind::directory;
  if (S_ISLNK(mode)) return EntryKind::symlink;
  if (S_ISFIFO(mode)) return EntryKind::fifo;
  if (S_ISSOCK(mode)) return EntryKind::socket;
  if (S_ISCHR(mode) || S_ISBLK(mode)) return EntryKind::device;
  return EntryKind::other;
}

// A NUL cannot occur: neither a directory listing nor the tree format can
// carry one in a name.
std::optional<std::string> name_refusal(std::string_view name) {
  if (name.empty() || name == "." || name == "..") return "empty, '.' or '..' name";
  if (name.find('/') != std::string_view::npos) return "name contains '/'";
  if (equals_ignoring_case(name, ".git")) return "'.git' component";
  if (!is_valid_utf8(name)) return "name is not UTF-8";
  if (name.size() > kMaxNameBytes) return "name longer than 255 bytes";
  return std::nullopt;
}

std::optional<std::string> kind_refusal(EntryKind kind) {
  switch (kind) {
    case EntryKind::file:
    case EntryKind::directory:
      return std::nullopt;
    case EntryKind::symlink:
      return "symbolic link";
    case EntryKind::gitlink:
      return "gitlink (submodule)";
    case EntryKind::fifo:
      return "FIFO";
    case EntryKind::socket:
      return "socket";
    case EntryKind::device:
      return "device";
    case EntryKind::other:
      break;
  }
  return "unsupported file mode";
}

std::optional<std::string> depth_refusal(int depth) {
  if (depth <= kMaxTreeDepth) return std::nullopt;
  return "nested deeper than " + std::to_string(kMaxTreeDepth) + " directories";
}

std::optional<std::string> file_size_refusal(std::uint64_t size, const TreeLimits& limits) {
  if (size <= limits.max_bytes) return std::nullopt;
  return "file of " + std::to_string(size) + " bytes is over the byte limit of " +
         std::to_string(limits.max_bytes);
}

std::optional<std::string> TreeTally::over_limit() const {
  if (entries_ > limits_.max_files)
    return "checkpoint has more than " + std::to_string(limits_.max_files) + " files";
  if (bytes_ > limits_.max_bytes)
    return "checkpoint is larger than the limit of " + std::to_string(limits_.max_bytes) + " bytes";
  return std::nullopt;
}

void LeftOut::add(std::string_view path, std::string rule) {
  if (named.size() == kMaxNamedLeftOut) {
    ++unnamed;
    return;
  }
  named.push_back({.path = printable(path), .rule = std::move(rule)});
}

}  // namespace inflight::checkpoint
