// The bare repository of one fuzz process, removed at its exit: the targets
// that read git objects write each input's objects into it, and remove them
// after, so that a long run does not fill the disk with loose objects.
#pragma once

#include <git2.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace inflight::fuzz {

inline void check(int git_result) {
  if (git_result != 0) std::abort();
}

struct ScratchRepo {
  // Under the temp dir, named after the target and this process.
  explicit ScratchRepo(const std::string& target)
      : root(std::filesystem::temp_directory_path() /
             ("inflight-fuzz-" + target + "-" + std::to_string(static_cast<long>(::getpid())))) {
    git_libgit2_init();
    std::filesystem::create_directories(root);
    check(git_repository_init(&repo, (root / "cache.git").c_str(), 1));
    check(git_signature_new(&author, "fuzz", "fuzz@example.invalid", 0, 0));
  }
  ~ScratchRepo() {
    git_signature_free(author);
    git_repository_free(repo);
    std::error_code ignored;
    std::filesystem::remove_all(root, ignored);
  }
  ScratchRepo(const ScratchRepo&) = delete;
  ScratchRepo& operator=(const ScratchRepo&) = delete;

  // Removes the loose object `id`.
  void remove_object(const git_oid& id) const {
    const std::string hex = git_oid_tostr_s(&id);
    std::error_code ignored;
    std::filesystem::remove(root / "cache.git" / "objects" / hex.substr(0, 2) / hex.substr(2),
                            ignored);
  }

  const std::filesystem::path root;
  git_repository* repo = nullptr;
  git_signature* author = nullptr;
};

}  // namespace inflight::fuzz
