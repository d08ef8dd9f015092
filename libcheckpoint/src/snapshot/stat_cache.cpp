#include "snapshot/stat_cache.hpp"

#include <fstream>
#include <system_error>

#include "git/cache_repo_impl.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"
#include "inflight/core/bounded_json.hpp"
#include "inflight/core/run_dir.hpp"

namespace inflight::checkpoint {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

constexpr int kFormat = 1;
// A run dir of 100,000 files of 1,000 chunks at most would be far more; a
// kept cache over this is not read.
constexpr JsonLimits kLimits{.max_bytes = 256u << 20, .max_depth = 8};

// One file per run dir, named by a hash of its path.
fs::path stat_cache_path(CacheRepo& cache, const fs::path& run_dir) {
  const std::string key = fs::absolute(run_dir).lexically_normal().string();
  git_oid oid;
  git_odb_hash(&oid, key.data(), key.size(), GIT_OBJECT_BLOB);
  return cache.path() / "inflight-stat" / oid_hex(oid);
}

Json file_to_json(const StoredFile& file) {
  Json chunks = Json::array();
  for (const auto& chunk : file.chunks) chunks.push_back(oid_hex(chunk));
  return {{"size", file.stat.size},         {"mtime_ns", file.stat.mtime_ns},
          {"ctime_ns", file.stat.ctime_ns}, {"inode", file.stat.inode},
          {"mode", file.stat.mode},         {"entry", oid_hex(file.entry)},
          {"chunks", std::move(chunks)}};
}

// Throws when the entry is malformed or names an object the cache lacks.
StoredFile file_from_json(const Json& j, git_odb* odb) {
  const auto known = [odb](const Json& hex) {
    const git_oid oid = parse_oid(hex.get<std::string>());
    if (git_odb_exists(odb, &oid) != 1) throw std::runtime_error("object not in the cache");
    return oid;
  };
  StoredFile file{.stat = {.size = j.at("size").get<std::uint64_t>(),
                           .mtime_ns = j.at("mtime_ns").get<std::int64_t>(),
                           .ctime_ns = j.at("ctime_ns").get<std::int64_t>(),
                           .inode = j.at("inode").get<std::uint64_t>(),
                           .mode = j.at("mode").get<std::uint32_t>()},
                  .entry = known(j.at("entry")),
                  .chunks = {}};
  for (const auto& chunk : j.at("chunks")) file.chunks.push_back(known(chunk));
  return file;
}

std::string read_text(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec || size > kLimits.max_bytes) return {};
  std::ifstream in(path, std::ios::binary);
  std::string text(size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  return in ? text : std::string();
}

}  // namespace

StatCache load_stat_cache(CacheRepo& cache, const fs::path& run_dir) {
  const auto path = stat_cache_path(cache, run_dir);
  const auto j = parse_bounded_json(read_text(path), kLimits);
  StatCache loaded;
  try {
    if (!j || j->at("format") != kFormat || j->at("run_dir") != run_dir.string()) return {};
    const OdbHandle odb = open_odb(raw_repo(cache));
    for (const auto& [relative, file] : j->at("files").items())
      loaded.emplace(relative, file_from_json(file, odb.get()));
  } catch (const std::exception&) {
    return {};
  }
  return loaded;
}

void save_stat_cache(CacheRepo& cache, const fs::path& run_dir, const StatCache& stat_cache) {
  Json files = Json::object();
  for (const auto& [relative, file] : stat_cache) files[relative] = file_to_json(file);
  const Json j{{"format", kFormat}, {"run_dir", run_dir.string()}, {"files", std::move(files)}};
  const auto path = stat_cache_path(cache, run_dir);
  fs::create_directories(path.parent_path());
  write_file_atomically(path, j.dump(), Durability::atomic);
}

void drop_stat_cache(CacheRepo& cache, const fs::path& run_dir) {
  std::error_code ec;
  fs::remove(stat_cache_path(cache, run_dir), ec);
}

}  // namespace inflight::checkpoint
