#include "snapshot/plain_tree.hpp"

#include <string>

#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/git_handle.hpp"
#include "git/repo_objects.hpp"
#include "snapshot/chunked_file.hpp"
#include "snapshot/tree_validation.hpp"

namespace inflight::checkpoint {

namespace {

git_oid joined_chunks(CacheRepo& cache, const git_tree_entry* chunks) {
  git_repository* repo = raw_repo(cache);
  std::string bytes;
  const TreeHandle tree = lookup_tree(repo, *git_tree_entry_id(chunks));
  for_each_chunk(repo, tree.get(), git_tree_entry_name(chunks),
                 [&bytes](const void* data, std::size_t n) {
                   bytes.append(static_cast<const char*>(data), n);
                 });
  return write_object(cache, bytes.data(), bytes.size(), GIT_OBJECT_BLOB);
}

}  // namespace

git_oid plain_tree(CacheRepo& cache, const git_tree* tree) {
  git_repository* repo = raw_repo(cache);
  git_treebuilder* raw = nullptr;
  git_check(git_treebuilder_new(&raw, repo, nullptr), "create result tree");
  const TreeBuilderHandle builder(raw);
  for (std::size_t i = 0; i < git_tree_entrycount(tree); ++i) {
    const git_tree_entry* entry = git_tree_entry_byindex(tree, i);
    const git_oid* id = git_tree_entry_id(entry);
    git_filemode_t mode = git_tree_entry_filemode(entry);
    git_oid oid = *id;
    if (mode == GIT_FILEMODE_TREE && has_chunk_suffix(git_tree_entry_name(entry))) {
      oid = joined_chunks(cache, entry);
      mode = GIT_FILEMODE_BLOB;
    } else if (mode == GIT_FILEMODE_TREE) {
      oid = plain_tree(cache, lookup_tree(repo, *id).get());
    }
    const std::string name = target_name(entry);
    git_check(git_treebuilder_insert(nullptr, builder.get(), name.c_str(), &oid, mode),
              "add " + name + " to the result tree");
  }
  git_oid out;
  git_check(git_treebuilder_write(&out, builder.get()), "write result tree");
  return out;
}

}  // namespace inflight::checkpoint
