// The refs a push sends its commits from. libgit2 1.5 pushes only from a
// ref (an oid as the source is "no such reference"), and the commits may
// exist only in this process's memory (CacheRepo). As loose tags in the
// cache they cost a restore of 100 runs about 1,000 file operations
// (lock, rename, delete, rmdir), and other agents' fetches saw names of
// objects they could not read. Instead a push runs on a second handle of
// the cache repository: the same objects and config, with refs held in a
// map that dies with the push.
#pragma once

#include <git2.h>

#include <map>
#include <string>
#include <vector>

#include "git/git_handle.hpp"
#include "inflight/checkpoint/git_store.hpp"
#include "remote/stub_objects.hpp"

namespace inflight::checkpoint {

class PushSources {
 public:
  explicit PushSources(CacheRepo& cache);
  PushSources(const PushSources&) = delete;
  PushSources& operator=(const PushSources&) = delete;

  // A ref at `commit` to push `ref` from.
  std::string add(const std::string& ref, const git_oid& commit);
  // From now on the push reads and writes an object database of its own (stub_objects.hpp): a
  // memory that takes what RefUpdate::build writes through git(), then the cache's objects, then
  // stubs. What it writes never reaches the cache: a commit whose parent is only the server's,
  // left there, would fail every later push of the cache that walks to it.
  void use_own_objects();
  // The server holds `commit`, a parent of a commit this push sends, which the cache lacks: a
  // stub stands in for it. Uses the push's own objects.
  void stub(const git_oid& commit);
  // … and the server's `commit` reaches `parents` (hex): libgit2 hides them with it, and never
  // sends those the cache holds, nor a stub of those it lacks.
  void stub(const git_oid& commit, const std::vector<std::string>& parents);
  // The repository to push from: its refs are the sources alone.
  git_repository* git() const { return repo_.get(); }

 private:
  // Outlive repo_, whose refdb and object database read them.
  std::map<std::string, git_oid> refs_;
  OdbHandle cache_objects_;
  Stubs stubs_;
  bool own_objects_ = false;
  RepositoryHandle repo_;
};

}  // namespace inflight::checkpoint
