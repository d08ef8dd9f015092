#include <system_error>

#include "cache_repo_impl.hpp"
#include "git_error.hpp"
#include "inflight/checkpoint/git_store.hpp"

namespace inflight::checkpoint {

RepositoryHandle open_or_init_bare(const std::filesystem::path& path) {
  git_repository* raw = nullptr;
  int rc = git_repository_open_bare(&raw, path.c_str());
  if (rc == GIT_ENOTFOUND) {
    git_error_clear();
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) throw GitError(GitErrorKind::other, "create " + path.string() + ": " + ec.message());
    rc = git_repository_init(&raw, path.c_str(), /*is_bare=*/1);
  }
  RepositoryHandle repo(raw);
  git_check(rc, "open repository " + path.string());
  return repo;
}

CacheRepo::CacheRepo(const std::filesystem::path& path)
    : impl_(std::make_unique<Impl>(Impl{path, open_or_init_bare(path)})) {}

CacheRepo::~CacheRepo() = default;
CacheRepo::CacheRepo(CacheRepo&&) noexcept = default;
CacheRepo& CacheRepo::operator=(CacheRepo&&) noexcept = default;

const std::filesystem::path& CacheRepo::path() const {
  return impl_->path;
}
CacheRepo::Impl& CacheRepo::impl() {
  return *impl_;
}

}  // namespace inflight::checkpoint
