// Writes chunk trees in the two-level layout and reads both layouts, checking
// every name and mode on the way: a chunk tree comes from a branch, which is
// untrusted.
#include "snapshot/chunked_file.hpp"

#include <algorithm>
#include <span>
#include <string>

#include "git/git_error.hpp"
#include "git/git_handle.hpp"
#include "git/repo_objects.hpp"
#include "inflight/core/bounded_json.hpp"

namespace inflight::checkpoint {

namespace {

using ChunkVisitor = std::function<void(const git_oid&, const std::string&)>;

git_oid write_numbered_tree(git_repository* repo, std::span<const git_oid> entries,
                            git_filemode_t mode) {
  git_treebuilder* raw = nullptr;
  git_check(git_treebuilder_new(&raw, repo, nullptr), "create chunk tree");
  TreeBuilderHandle builder(raw);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    git_check(
        git_treebuilder_insert(nullptr, builder.get(), chunk_name(i).c_str(), &entries[i], mode),
        "add chunk entry " + chunk_name(i));
  }
  git_oid tree;
  git_check(git_treebuilder_write(&tree, builder.get()), "write chunk tree");
  return tree;
}

[[noreturn]] void refuse(const std::string& path, const std::string& rule) {
  throw GitError(Failure::hostile_tree,
                 "refusing checkpoint entry '" + printable(path) + "': " + rule);
}

// Entry `i` of one level, which must be named chunk_name(i) with `mode`:
// entries are sorted by name, so six-digit names count up from 0.
const git_tree_entry* numbered_entry(const git_tree* tree, std::size_t i, git_filemode_t mode,
                                     const std::string& shown) {
  const git_tree_entry* entry = git_tree_entry_byindex(tree, i);
  if (git_tree_entry_filemode(entry) != mode || git_tree_entry_name(entry) != chunk_name(i)) {
    refuse(shown + "/" + git_tree_entry_name(entry),
           std::string(mode == GIT_FILEMODE_TREE ? "not chunk group " : "not chunk blob ") +
               chunk_name(i));
  }
  return entry;
}

void visit_blobs(const git_tree* tree, const std::string& shown, const std::string& prefix,
                 const ChunkVisitor& visit) {
  for (std::size_t i = 0; i < git_tree_entrycount(tree); ++i) {
    const git_tree_entry* entry = numbered_entry(tree, i, GIT_FILEMODE_BLOB, shown);
    visit(*git_tree_entry_id(entry), prefix + chunk_name(i));
  }
}

TreeHandle group_tree(git_repository* repo, const git_tree_entry* entry, const std::string& path) {
  git_tree* raw = nullptr;
  if (git_tree_lookup(&raw, repo, git_tree_entry_id(entry)) != 0) {
    git_error_clear();
    refuse(path, "chunk group is not a readable tree");
  }
  return TreeHandle(raw);
}

}  // namespace

std::string chunk_name(std::size_t index) {
  const auto digits = std::to_string(index);
  return std::string(digits.size() < 6 ? 6 - digits.size() : 0, '0') + digits;
}

bool has_chunk_suffix(std::string_view name) {
  return name.ends_with(kChunkSuffix);
}

git_oid write_chunk_tree(git_repository* repo, const std::vector<git_oid>& chunks) {
  std::vector<git_oid> groups;
  for (std::size_t first = 0; first < chunks.size(); first += kChunksPerGroup) {
    const std::size_t count = std::min(kChunksPerGroup, chunks.size() - first);
    groups.push_back(
        write_numbered_tree(repo, std::span(chunks).subspan(first, count), GIT_FILEMODE_BLOB));
  }
  return write_numbered_tree(repo, groups, GIT_FILEMODE_TREE);
}

void for_each_chunk_id(git_repository* repo, const git_tree* chunks, const std::string& shown,
                       const ChunkVisitor& visit) {
  const std::size_t groups = git_tree_entrycount(chunks);
  const bool flat = groups == 0 ||
                    git_tree_entry_filemode(git_tree_entry_byindex(chunks, 0)) != GIT_FILEMODE_TREE;
  // Group trees may be shared: the count, not the objects, bounds the work.
  if (groups > (flat ? kMaxChunks : (kMaxChunks + kChunksPerGroup - 1) / kChunksPerGroup))
    refuse(shown, "more than " + std::to_string(kMaxChunks) + " chunks");
  if (flat) return visit_blobs(chunks, shown, "", visit);  // an earlier release's layout
  for (std::size_t g = 0; g < groups; ++g) {
    const git_tree_entry* entry = numbered_entry(chunks, g, GIT_FILEMODE_TREE, shown);
    const std::string path = shown + "/" + chunk_name(g);
    const TreeHandle group = group_tree(repo, entry, path);
    const std::size_t count = git_tree_entrycount(group.get());
    // Only the last group may be short, so chunk i is always at i / kChunksPerGroup.
    if (count == 0 || count > kChunksPerGroup || (g + 1 < groups && count != kChunksPerGroup))
      refuse(path, "chunk group of " + std::to_string(count) + " chunks");
    visit_blobs(group.get(), path, chunk_name(g) + "/", visit);
  }
}

void for_each_chunk(git_repository* repo, const git_tree* chunks, const std::string& shown,
                    const std::function<void(const void*, std::size_t)>& sink) {
  for_each_chunk_id(repo, chunks, shown, [&](const git_oid& id, const std::string& path) {
    git_blob* raw = nullptr;
    git_check(git_blob_lookup(&raw, repo, &id), "read chunk " + shown + "/" + path);
    const BlobHandle blob(raw);
    sink(git_blob_rawcontent(blob.get()), static_cast<std::size_t>(git_blob_rawsize(blob.get())));
  });
}

}  // namespace inflight::checkpoint
