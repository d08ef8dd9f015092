// How a big file is laid out in a tree: `<name>.inflight-chunks` is a tree of
// blobs `000000`, `000001`, ... of kChunkSize bytes each (the last may be
// shorter), so an append rewrites only the last chunks.
#pragma once

#include <git2.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace inflight::checkpoint {

inline constexpr std::uint64_t kChunkSize = 32 * 1024;
inline constexpr std::uint64_t kChunkThreshold = 64 * 1024;  // larger files are chunked
inline constexpr std::size_t kMaxChunks = 1'000'000;         // six-digit names
inline constexpr std::string_view kChunkSuffix = ".inflight-chunks";

std::string chunk_name(std::size_t index);
bool is_chunk_name(std::string_view name);
bool has_chunk_suffix(std::string_view name);

git_oid write_chunk_tree(git_repository* repo, const std::vector<git_oid>& chunks);

// Calls `sink` with each chunk's bytes in file order. Throws
// GitError(hostile_tree) when the tree is not a well-formed chunk tree.
void for_each_chunk(git_repository* repo, const git_tree* chunks,
                    const std::function<void(const void* data, std::size_t size)>& sink);

}  // namespace inflight::checkpoint
