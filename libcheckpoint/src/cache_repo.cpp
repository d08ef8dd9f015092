// The cache repo: disposable, so anything that is not a repository where it
// should be is replaced. It appears whole or not at all (made aside, then
// renamed into place), so an agent killed while creating it leaves nothing
// that wedges the next one.
#include <git2.h>
#include <unistd.h>

#include <system_error>

#include "cache_repo_impl.hpp"
#include "git_error.hpp"
#include "inflight/checkpoint/git_store.hpp"
#include "inflight/checkpoint/run_dir.hpp"

namespace inflight::checkpoint {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void cache_failure(const fs::path& path, const std::string& what,
                                const std::string& why) {
  throw GitError(GitErrorKind::cache, "repository " + path.string() + ": " + what + ": " + why);
}

// A name of this process's own beside `path`.
fs::path beside(const fs::path& path, const char* what) {
  return path.parent_path() /
         (path.filename().string() + "." + what + "-" + std::to_string(getpid()));
}

// Moves whatever is at `path` out of the way and deletes it; another agent
// doing the same at once is not an error.
void discard(const fs::path& path) {
  const auto doomed = beside(path, "broken");
  std::error_code ec;
  fs::rename(path, doomed, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    cache_failure(path, "move aside", ec.message());
  fs::remove_all(doomed, ec);
}

// Another agent may create it at the same time: the first rename wins and
// the others use its repository.
void create(const fs::path& path) {
  const auto fresh = beside(path, "new");
  std::error_code ec;
  fs::remove_all(fresh, ec);
  fs::create_directories(path.parent_path(), ec);
  if (ec) cache_failure(path, "create parent", ec.message());
  git_repository* raw = nullptr;
  const int rc = git_repository_init(&raw, fresh.c_str(), /*is_bare=*/1);
  git_repository_free(raw);
  if (rc != 0) {
    fs::remove_all(fresh, ec);
    throw_git_error(rc, "create repository " + fresh.string());
  }
  fs::rename(fresh, path, ec);
  if (ec) fs::remove_all(fresh, ec);
}

}  // namespace

RepositoryHandle open_or_init_bare(const fs::path& path) {
  git_repository* raw = nullptr;
  if (git_repository_open_bare(&raw, path.c_str()) == 0) return RepositoryHandle(raw);
  git_error_clear();
  std::error_code ec;
  if (fs::symlink_status(path, ec).type() != fs::file_type::not_found) discard(path);
  create(path);
  git_check(git_repository_open_bare(&raw, path.c_str()), "open repository " + path.string());
  return RepositoryHandle(raw);
}

namespace {

// Checkpoint objects are mostly unique chunks and run files, so a delta
// search costs a push more time than the bytes it saves. The pack builder
// skips objects above its big-file threshold, which libgit2 1.5 reads from
// pack.deltaCacheSize (git itself reads pack.bigFileThreshold): set both.
void skip_delta_search(git_repository* repo) {
  git_config* raw = nullptr;
  if (git_repository_config(&raw, repo) != 0) return git_error_clear();
  const ConfigHandle config(raw);
  std::int64_t value = 0;
  if (git_config_get_int64(&value, raw, "pack.deltaCacheSize") == 0) return;
  // Another agent may be writing the same setting: either write will do.
  if (git_config_set_int64(raw, "pack.deltaCacheSize", 1) != 0 ||
      git_config_set_int64(raw, "pack.bigFileThreshold", 1) != 0)
    git_error_clear();
}

}  // namespace

CacheRepo::CacheRepo(const fs::path& path) {
  try {
    impl_ = std::make_unique<Impl>(Impl{path, open_or_init_bare(path)});
  } catch (const GitError& e) {
    if (e.kind() == GitErrorKind::cache) throw;
    throw GitError(GitErrorKind::cache, e.what());
  }
  skip_delta_search(impl_->repo.get());
}

void CacheRepo::check_writable() {
  const auto probe = beside(impl_->path, "probe");
  try {
    write_file_atomically(probe, "inflight: can this disk hold a checkpoint?\n",
                          Durability::atomic);
  } catch (const std::exception& e) {
    cache_failure(impl_->path, "cannot write", e.what());
  }
  std::error_code ec;
  fs::remove(probe, ec);
}

CacheRepo::~CacheRepo() = default;
CacheRepo::CacheRepo(CacheRepo&&) noexcept = default;
CacheRepo& CacheRepo::operator=(CacheRepo&&) noexcept = default;

const fs::path& CacheRepo::path() const {
  return impl_->path;
}
CacheRepo::Impl& CacheRepo::impl() {
  return *impl_;
}

}  // namespace inflight::checkpoint
