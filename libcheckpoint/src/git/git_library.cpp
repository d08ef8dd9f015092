#include <git2.h>

#include "git/git_error.hpp"
#include "inflight/checkpoint/git_store.hpp"

namespace inflight::checkpoint {

GitLibrary::GitLibrary() {
  git_check(git_libgit2_init(), "initialise libgit2");
  // Run dirs and results repos live on volumes mounted with whatever owner
  // the cluster chose; we never search parent directories for a repository,
  // so the safe.directory ownership check only gets in the way.
  git_check(git_libgit2_opts(GIT_OPT_SET_OWNER_VALIDATION, 0), "disable owner validation");
  // As in git, an object read is not hashed again: what we hashed ourselves
  // moments ago is packed from memory, what a fetch brought was hashed by
  // the indexer, and a results repo hashes every object it receives.
  git_check(git_libgit2_opts(GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION, 0),
            "disable hash verification on read");
}

GitLibrary::~GitLibrary() {
  git_libgit2_shutdown();
}

}  // namespace inflight::checkpoint
