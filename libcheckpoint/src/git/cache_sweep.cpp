// See cache_sweep.hpp: the temp files of agents killed at their deadline.
#include "git/cache_sweep.hpp"

#include <sys/stat.h>

#include <string_view>
#include <system_error>

namespace inflight::checkpoint {

namespace fs = std::filesystem;

namespace {

bool temp_in_pack_dir(std::string_view name) {
  return name.starts_with("tmp_pack_inflight_") || name.starts_with("pack_git2_") ||
         name.ends_with(".lock");
}

// write_file_atomically's temp copy of NAME is .NAME.tmp.
bool atomic_write_temp(std::string_view name) {
  return name.starts_with(".") && name.ends_with(".tmp");
}

bool any_name(std::string_view) {
  return true;
}

// One directory's entries of `kind` (S_IFREG, S_IFDIR) that `is_temp` names and that were last
// written before `cutoff` (this machine's clock, as the files' times are).
std::size_t sweep_dir(const fs::path& dir, bool (*is_temp)(std::string_view), mode_t kind,
                      std::chrono::system_clock::time_point cutoff) {
  std::size_t removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (!is_temp(name)) continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || (st.st_mode & S_IFMT) != kind) continue;
    if (std::chrono::system_clock::from_time_t(st.st_mtime) >= cutoff) continue;
    std::error_code failed;
    fs::remove_all(it->path(), failed);
    if (!failed) ++removed;
  }
  return removed;
}

}  // namespace

std::size_t sweep_temp_files(const fs::path& cache, std::chrono::seconds older_than) {
  const auto cutoff = std::chrono::system_clock::now() - older_than;
  return sweep_dir(cache / "objects" / "pack", temp_in_pack_dir, S_IFREG, cutoff) +
         sweep_dir(cache, atomic_write_temp, S_IFREG, cutoff) +
         sweep_dir(cache / "inflight-stat", atomic_write_temp, S_IFREG, cutoff) +
         sweep_dir(cache / kLookupDir, any_name, S_IFDIR, cutoff);
}

}  // namespace inflight::checkpoint
