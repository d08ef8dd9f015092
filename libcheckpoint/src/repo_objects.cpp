#include "repo_objects.hpp"

#include "cache_repo_impl.hpp"
#include "git_error.hpp"
#include "git_handle.hpp"
#include "oid_text.hpp"

namespace inflight::checkpoint {

CommitHandle lookup_commit(git_repository* repo, const git_oid& oid) {
  git_commit* raw = nullptr;
  git_check(git_commit_lookup(&raw, repo, &oid), "find commit " + oid_hex(oid));
  return CommitHandle(raw);
}

CommitHandle lookup_commit(git_repository* repo, const std::string& hex) {
  return lookup_commit(repo, parse_oid(hex));
}

TreeHandle tree_of(const git_commit* commit) {
  git_tree* raw = nullptr;
  git_check(git_commit_tree(&raw, commit), "read tree of " + oid_hex(*git_commit_id(commit)));
  return TreeHandle(raw);
}

TreeHandle lookup_tree(git_repository* repo, const git_oid& oid) {
  git_tree* raw = nullptr;
  git_check(git_tree_lookup(&raw, repo, &oid), "find tree " + oid_hex(oid));
  return TreeHandle(raw);
}

git_oid empty_tree(git_repository* repo) {
  git_treebuilder* raw = nullptr;
  git_check(git_treebuilder_new(&raw, repo, nullptr), "create tree");
  const TreeBuilderHandle builder(raw);
  git_oid oid;
  git_check(git_treebuilder_write(&oid, builder.get()), "write empty tree");
  return oid;
}

git_oid write_commit(CacheRepo& cache, const git_oid& tree_oid, const git_commit* parent,
                     const std::string& message) {
  git_repository* repo = raw_repo(cache);
  git_signature* raw_signature = nullptr;
  git_check(git_signature_now(&raw_signature, "inflight", "inflight@localhost"), "make signature");
  const SignatureHandle signature(raw_signature);
  const TreeHandle tree = lookup_tree(repo, tree_oid);
  const git_commit* parents[] = {parent};
  git_oid commit;
  git_check(git_commit_create(&commit, repo, nullptr, signature.get(), signature.get(), nullptr,
                              message.c_str(), tree.get(), parent != nullptr ? 1 : 0, parents),
            "write commit");
  cache.impl().new_commits.push_back(commit);
  return commit;
}

OdbHandle open_odb(git_repository* repo) {
  git_odb* raw = nullptr;
  git_check(git_repository_odb(&raw, repo), "open object database");
  return OdbHandle(raw);
}

}  // namespace inflight::checkpoint
