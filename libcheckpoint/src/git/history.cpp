// What a commit of the cache holds: one file of its run dir, the records of
// its progress file, and the first-parent history the listing shows.
#include <cstdint>

#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"
#include "inflight/core/bounded_json.hpp"
#include "inflight/core/run_dir.hpp"
#include "snapshot/chunked_file.hpp"

namespace inflight::checkpoint {

namespace {

TreeEntryHandle entry_at(const git_tree* tree, const std::string& path) {
  git_tree_entry* raw = nullptr;
  const int rc = git_tree_entry_bypath(&raw, tree, path.c_str());
  if (rc == GIT_ENOTFOUND) {
    git_error_clear();
    return TreeEntryHandle();
  }
  git_check(rc, "look up " + path);
  return TreeEntryHandle(raw);
}

[[noreturn]] void too_large(const std::string& path, std::uint64_t max_bytes) {
  throw GitError(Failure::over_limit,
                 printable(path) + " is larger than " + std::to_string(max_bytes) + " bytes");
}

// The header alone is read first: a blob is inflated whole.
std::string blob_content(git_repository* repo, const git_oid& oid, const std::string& path,
                         std::uint64_t max_bytes) {
  std::size_t size = 0;
  git_object_t type{};
  git_check(git_odb_read_header(&size, &type, open_odb(repo).get(), &oid), "read " + path);
  if (size > max_bytes) too_large(path, max_bytes);
  git_blob* raw = nullptr;
  git_check(git_blob_lookup(&raw, repo, &oid), "read " + path);
  const BlobHandle blob(raw);
  return std::string(static_cast<const char*>(git_blob_rawcontent(blob.get())),
                     static_cast<std::size_t>(git_blob_rawsize(blob.get())));
}

std::string chunked_content(git_repository* repo, const git_oid& oid, const std::string& path,
                            std::uint64_t max_bytes) {
  const TreeHandle chunks = lookup_tree(repo, oid);
  std::string content;
  for_each_chunk_id(repo, chunks.get(), path + std::string(kChunkSuffix),
                    [&](const git_oid& chunk, const std::string&) {
                      content += blob_content(repo, chunk, path, max_bytes - content.size());
                    });
  return content;
}

}  // namespace

std::optional<std::string> read_file_at(CacheRepo& repo, const std::string& commit,
                                        const std::string& path, std::uint64_t max_bytes) {
  git_repository* git = raw_repo(repo);
  const TreeHandle tree = tree_of(lookup_commit(git, commit).get());
  if (const TreeEntryHandle entry = entry_at(tree.get(), path)) {
    if (git_tree_entry_type(entry.get()) != GIT_OBJECT_BLOB) return std::nullopt;
    return blob_content(git, *git_tree_entry_id(entry.get()), path, max_bytes);
  }
  if (const TreeEntryHandle chunks = entry_at(tree.get(), path + std::string(kChunkSuffix))) {
    if (git_tree_entry_type(chunks.get()) != GIT_OBJECT_TREE) return std::nullopt;
    return chunked_content(git, *git_tree_entry_id(chunks.get()), path, max_bytes);
  }
  return std::nullopt;
}

std::optional<std::uint64_t> lines_of_blob_at(CacheRepo& repo, const std::string& commit,
                                              const std::string& path) {
  git_repository* git = raw_repo(repo);
  const TreeHandle tree = tree_of(lookup_commit(git, commit).get());
  if (const TreeEntryHandle entry = entry_at(tree.get(), path)) {
    if (git_tree_entry_type(entry.get()) != GIT_OBJECT_BLOB) return 0;
    git_blob* raw = nullptr;
    git_check(git_blob_lookup(&raw, git, git_tree_entry_id(entry.get())), "read " + path);
    const BlobHandle blob(raw);
    return complete_lines({static_cast<const char*>(git_blob_rawcontent(blob.get())),
                           static_cast<std::size_t>(git_blob_rawsize(blob.get()))});
  }
  if (entry_at(tree.get(), path + std::string(kChunkSuffix))) return std::nullopt;
  return 0;
}

CommitSummary commit_summary(CacheRepo& repo, const std::string& oid) {
  const CommitHandle commit = lookup_commit(raw_repo(repo), oid);
  return {oid, static_cast<std::int64_t>(git_commit_time(commit.get())),
          git_commit_message(commit.get())};
}

std::vector<CommitSummary> history(CacheRepo& repo, const std::string& commit) {
  git_repository* git = raw_repo(repo);
  std::vector<CommitSummary> commits;
  for (CommitHandle current = lookup_commit(git, commit); current;) {
    commits.push_back(CommitSummary{oid_hex(*git_commit_id(current.get())),
                                    static_cast<std::int64_t>(git_commit_time(current.get())),
                                    git_commit_message(current.get())});
    if (git_commit_parentcount(current.get()) == 0) break;
    current = lookup_commit(git, *git_commit_parent_id(current.get(), 0));
  }
  return commits;
}

}  // namespace inflight::checkpoint
