// See packed_refs.hpp.
#include "git/packed_refs.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "git/cache_lock.hpp"
#include "git/oid_text.hpp"
#include "inflight/checkpoint/git_store.hpp"
#include "inflight/core/run_dir.hpp"

namespace inflight::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kHeader = "# pack-refs with: peeled fully-peeled sorted \n";

[[noreturn]] void cache_failure(const fs::path& path, const std::string& what) {
  throw GitError(Failure::cache, path.string() + ": " + what);
}

std::string read_or_empty(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!fs::exists(path, ec) && !ec) return {};
    cache_failure(path, "cannot read");
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) cache_failure(path, "cannot read");
  return std::move(text).str();
}

// The loose refs under `fold` (their names and commits), from earlier builds.
std::vector<std::pair<std::string, std::string>> loose_refs(const fs::path& repo,
                                                            std::string_view fold) {
  std::vector<std::pair<std::string, std::string>> found;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(repo / fold, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    auto oid = read_or_empty(it->path());
    if (oid.ends_with('\n')) oid.pop_back();
    if (is_oid_hex(oid))
      found.emplace_back(fs::relative(it->path(), repo).generic_string(), std::move(oid));
  }
  return found;
}

}  // namespace

PackedRefs parse_packed_refs(std::string_view text) {
  PackedRefs refs;
  PackedRef* last = nullptr;
  for (std::size_t number = 1; !text.empty(); ++number) {
    const auto end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    const auto bad = [&] {
      throw std::invalid_argument("packed-refs line " + std::to_string(number) +
                                  " is not '<oid> <ref>'");
    };
    if (number == 1 && line.starts_with('#')) continue;
    if (line.starts_with('^')) {
      if (last == nullptr || !is_oid_hex(line.substr(1))) bad();
      last->peeled = line.substr(1);
      continue;
    }
    const auto space = line.find(' ');
    if (space == std::string_view::npos || !is_oid_hex(line.substr(0, space)) ||
        !line.substr(space + 1).starts_with("refs/"))
      bad();
    last = &(refs[std::string(line.substr(space + 1))] =
                 PackedRef{.oid = std::string(line.substr(0, space)), .peeled = {}});
  }
  return refs;
}

std::string write_packed_refs(const PackedRefs& refs) {
  std::string text(kHeader);
  for (const auto& [ref, packed] : refs) {
    text += packed.oid + " " + ref + "\n";
    if (!packed.peeled.empty()) text += "^" + packed.peeled + "\n";
  }
  return text;
}

void pack_refs(const fs::path& repo, const std::vector<std::pair<std::string, git_oid>>& refs,
               std::string_view fold) {
  if (refs.empty()) return;
  const CacheLock lock(repo, CacheLock::Mode::exclusive, "inflight-packed-refs.lock");
  const auto path = repo / "packed-refs";
  PackedRefs packed;
  try {
    packed = parse_packed_refs(read_or_empty(path));
  } catch (const std::invalid_argument& e) {
    cache_failure(path, e.what());
  }
  const auto loose = loose_refs(repo, fold);
  for (const auto& [ref, oid] : loose) packed[ref] = {.oid = oid, .peeled = {}};
  for (const auto& [ref, oid] : refs) {
    if (git_oid_is_zero(&oid))
      packed.erase(ref);
    else
      packed[ref] = {.oid = oid_hex(oid), .peeled = {}};
  }
  try {
    write_file_atomically(path, write_packed_refs(packed), Durability::atomic);
  } catch (const std::exception& e) {
    cache_failure(path, e.what());
  }
  std::error_code ec;
  if (!loose.empty()) fs::remove_all(repo / fold, ec);  // packed now: none is lost
}

}  // namespace inflight::checkpoint
