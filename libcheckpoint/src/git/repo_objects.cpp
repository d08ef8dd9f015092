#include "git/repo_objects.hpp"

#include <git2/sys/odb_backend.h>

#include <ctime>
#include <span>
#include <vector>

#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/git_handle.hpp"
#include "git/oid_text.hpp"

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

namespace {

git_oid write_commit_of(CacheRepo& cache, const git_oid& tree_oid,
                        std::span<const git_commit* const> parents, const std::string& message,
                        std::optional<git_time_t> at) {
  git_repository* repo = raw_repo(cache);
  git_signature* raw_signature = nullptr;
  git_check(at ? git_signature_new(&raw_signature, "inflight", "inflight@localhost", *at, 0)
               : git_signature_now(&raw_signature, "inflight", "inflight@localhost"),
            "make signature");
  const SignatureHandle signature(raw_signature);
  const TreeHandle tree = lookup_tree(repo, tree_oid);
  git_buf buffer = GIT_BUF_INIT;
  const int rc = git_commit_create_buffer(&buffer, repo, signature.get(), signature.get(), nullptr,
                                          message.c_str(), tree.get(), parents.size(),
                                          const_cast<const git_commit**>(parents.data()));
  const BufContents owned(&buffer);
  git_check(rc, "write commit");
  const git_oid commit = write_object(cache, buffer.ptr, buffer.size, GIT_OBJECT_COMMIT);
  cache.impl().new_commits.push_back(commit);
  return commit;
}

}  // namespace

git_oid write_commit(CacheRepo& cache, const git_oid& tree_oid, const git_commit* parent,
                     const std::string& message, std::optional<git_time_t> at) {
  const git_commit* parents[] = {parent};
  return write_commit_of(cache, tree_oid, std::span(parents, parent != nullptr ? 1 : 0), message,
                         at);
}

std::string commit_bytes(std::string_view tree, const std::vector<std::string>& parents,
                         std::int64_t time, std::string_view message) {
  std::string bytes = "tree " + std::string(tree) + "\n";
  for (const auto& parent : parents) bytes += "parent " + parent + "\n";
  const auto signature = "inflight <inflight@localhost> " + std::to_string(time) + " +0000\n";
  return bytes + "author " + signature + "committer " + signature + "\n" + std::string(message);
}

git_oid write_commit_on(git_repository* repo, const git_oid& tree,
                        const std::vector<std::string>& parents, const std::string& message) {
  for (const auto& parent : parents) parse_oid(parent);
  const auto bytes = commit_bytes(oid_hex(tree), parents, std::time(nullptr), message);
  git_oid oid;
  git_check(
      git_odb_write(&oid, open_odb(repo).get(), bytes.data(), bytes.size(), GIT_OBJECT_COMMIT),
      "write commit");
  return oid;
}

std::string merge_onto(CacheRepo& cache, const std::string& commit, const std::string& second) {
  git_repository* repo = raw_repo(cache);
  const CommitHandle ours = lookup_commit(repo, commit);
  const CommitHandle theirs = lookup_commit(repo, second);
  CommitHandle first;
  if (git_commit_parentcount(ours.get()) > 0)
    first = lookup_commit(repo, *git_commit_parent_id(ours.get(), 0));
  std::vector<const git_commit*> parents;
  if (first.get() != nullptr) parents.push_back(first.get());
  parents.push_back(theirs.get());
  return oid_hex(write_commit_of(cache, *git_commit_tree_id(ours.get()), parents,
                                 git_commit_message(ours.get()), std::nullopt));
}

std::string commit_on_own_tree(CacheRepo& cache, const std::string& parent,
                               const CheckpointInfo& info) {
  const CommitHandle commit = lookup_commit(raw_repo(cache), parent);
  return oid_hex(write_commit(cache, *git_commit_tree_id(commit.get()), commit.get(),
                              write_checkpoint_message(info)));
}

git_oid write_object(CacheRepo& cache, const void* data, std::size_t size, git_object_t type) {
  git_oid oid;
  git_check(git_odb_hash(&oid, data, size, type), "hash object");
  const OdbHandle odb = open_odb(raw_repo(cache));
  if (git_odb_exists_ext(odb.get(), &oid, GIT_ODB_LOOKUP_NO_REFRESH) == 1) return oid;
  git_odb_backend* memory = cache.impl().memory;
  git_check(memory->write(memory, &oid, data, size, type), "hold object " + oid_hex(oid));
  return oid;
}

OdbHandle open_odb(git_repository* repo) {
  git_odb* raw = nullptr;
  git_check(git_repository_odb(&raw, repo), "open object database");
  return OdbHandle(raw);
}

}  // namespace inflight::checkpoint
