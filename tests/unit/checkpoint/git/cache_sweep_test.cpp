// The temp files of agents killed at their deadline go when the next agent
// opens the cache; those of live agents (younger than the longest deadline),
// the cache's own files and the lock files held by flock stay.
#include "git/cache_sweep.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "inflight/checkpoint/checkpoint_store.hpp"
#include "temp_dir.hpp"

namespace inflight::checkpoint {
namespace {

namespace fs = std::filesystem;

StoreConfig store_config(const fs::path& dir) {
  StoreConfig config;
  config.cache_dir = dir / "cache.git";
  config.remote.url = (dir / "results.git").string();
  return config;
}

// A file at `path` last written `age` ago.
void make_file(const fs::path& path, std::chrono::seconds age) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << "left behind";
  const auto when = std::chrono::system_clock::now() - age;
  const timespec time{.tv_sec = std::chrono::system_clock::to_time_t(when), .tv_nsec = 0};
  const timespec times[2] = {time, time};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

// A lookup's throwaway repository at `path`, last changed `age` ago.
void make_lookup(const fs::path& path, std::chrono::seconds age) {
  make_file(path / "objects" / "pack" / "pack-1.pack", age);
  make_file(path / "HEAD", age);
  for (const auto& dir : {path / "objects" / "pack", path / "objects", path}) {
    const auto when = std::chrono::system_clock::now() - age;
    const timespec time{.tv_sec = std::chrono::system_clock::to_time_t(when), .tv_nsec = 0};
    const timespec times[2] = {time, time};
    ASSERT_EQ(::utimensat(AT_FDCWD, dir.c_str(), times, 0), 0) << dir;
  }
}

TEST(CacheSweep, RemovesOnlyTempFilesOlderThanTheLongestDeadline) {
  const TempDir dir;
  const GitLibrary library;
  const fs::path cache = dir.path() / "cache.git";
  { const CheckpointStore open(store_config(dir.path())); }
  const fs::path pack = cache / "objects" / "pack";
  const auto old = std::chrono::hours(2);
  const auto young = std::chrono::seconds(10);
  const std::vector<fs::path> swept = {pack / "tmp_pack_inflight_Ab12Cd", pack / "pack_git2_x1y2",
                                       pack / "pack-1234.idx.lock", cache / ".packed-refs.tmp",
                                       cache / "inflight-stat" / ".runs-a.tmp"};
  const std::vector<fs::path> kept = {pack / "tmp_pack_inflight_young1",  // a live agent's
                                      pack / "pack-1234.pack",       // the cache's own, however old
                                      cache / "inflight-refs.lock",  // held by flock, never removed
                                      cache / "inflight-packed-refs.lock", cache / "packed-refs"};
  for (const auto& path : swept) make_file(path, old);
  for (const auto& path : kept)
    make_file(path, path.filename() == "tmp_pack_inflight_young1" ? young : old);
  make_lookup(cache / kLookupDir / "dead01", old);
  make_lookup(cache / kLookupDir / "live01", young);

  EXPECT_EQ(sweep_temp_files(cache, std::chrono::minutes(2)), swept.size() + 1);
  for (const auto& path : swept) EXPECT_FALSE(fs::exists(path)) << path;
  for (const auto& path : kept) EXPECT_TRUE(fs::exists(path)) << path;
  EXPECT_FALSE(fs::exists(cache / kLookupDir / "dead01"));
  EXPECT_TRUE(fs::exists(cache / kLookupDir / "live01" / "HEAD"));
}

TEST(CacheSweep, TheStoreSweepsWhenItOpensWithAnAge) {
  const TempDir dir;
  const GitLibrary library;
  const fs::path cache = dir.path() / "cache.git";
  const auto config = store_config(dir.path());
  { const CheckpointStore open(config); }
  make_file(cache / "objects" / "pack" / "tmp_pack_inflight_dead01", std::chrono::hours(1));
  {
    const CheckpointStore without_age(config);  // zero: nothing is swept
    EXPECT_EQ(without_age.swept_temp_files(), 0u);
  }
  auto with_age = config;
  with_age.sweep_temp_after = std::chrono::seconds(120);
  const CheckpointStore store(with_age);
  EXPECT_EQ(store.swept_temp_files(), 1u);
  EXPECT_FALSE(fs::exists(cache / "objects" / "pack" / "tmp_pack_inflight_dead01"));
}

}  // namespace
}  // namespace inflight::checkpoint
