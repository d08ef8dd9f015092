#include "snapshot/chunked_file.hpp"

#include <algorithm>
#include <string>

#include "git/git_error.hpp"
#include "git/git_handle.hpp"

namespace inflight::checkpoint {

std::string chunk_name(std::size_t index) {
  const auto digits = std::to_string(index);
  return std::string(digits.size() < 6 ? 6 - digits.size() : 0, '0') + digits;
}

bool is_chunk_name(std::string_view name) {
  return name.size() == 6 &&
         std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool has_chunk_suffix(std::string_view name) {
  return name.ends_with(kChunkSuffix);
}

git_oid write_chunk_tree(git_repository* repo, const std::vector<git_oid>& chunks) {
  git_treebuilder* raw = nullptr;
  git_check(git_treebuilder_new(&raw, repo, nullptr), "create chunk tree");
  TreeBuilderHandle builder(raw);
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    git_check(git_treebuilder_insert(nullptr, builder.get(), chunk_name(i).c_str(), &chunks[i],
                                     GIT_FILEMODE_BLOB),
              "add chunk " + chunk_name(i));
  }
  git_oid tree;
  git_check(git_treebuilder_write(&tree, builder.get()), "write chunk tree");
  return tree;
}

void for_each_chunk(git_repository* repo, const git_tree* chunks,
                    const std::function<void(const void*, std::size_t)>& sink) {
  const std::size_t count = git_tree_entrycount(chunks);
  for (std::size_t i = 0; i < count; ++i) {
    const git_tree_entry* entry = git_tree_entry_byindex(chunks, i);
    // Entries are sorted by name, so six-digit names must count up from 0.
    if (git_tree_entry_filemode(entry) != GIT_FILEMODE_BLOB ||
        git_tree_entry_name(entry) != chunk_name(i)) {
      throw GitError(Failure::hostile_tree, "chunk tree entry '" +
                                                std::string(git_tree_entry_name(entry)) +
                                                "' is not blob " + chunk_name(i));
    }
    git_blob* raw = nullptr;
    git_check(git_blob_lookup(&raw, repo, git_tree_entry_id(entry)), "read chunk " + chunk_name(i));
    BlobHandle blob(raw);
    sink(git_blob_rawcontent(blob.get()), static_cast<std::size_t>(git_blob_rawsize(blob.get())));
  }
}

}  // namespace inflight::checkpoint
