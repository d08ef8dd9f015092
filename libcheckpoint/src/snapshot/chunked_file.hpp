// How a big file is laid out in a tree (docs/checkpoints.md "What a checkpoint saves, a restore
// takes"):
// `<name>.inflight-chunks` holds group trees `000000`, `000001`, ... of
// kChunksPerGroup blobs `000000`, `000001`, ... of kChunkSize bytes each (the
// last group and the last chunk may be shorter). An append rewrites only the
// last chunks, the last group and the top tree, so what a periodic push sends
// does not grow with the file. Earlier releases put the chunk blobs straight
// into `<name>.inflight-chunks`; such branches still restore.
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
inline constexpr std::size_t kChunksPerGroup = 256;          // 8 MiB of file per group tree
inline constexpr std::size_t kMaxChunks = 1'000'000;         // 32 GB; six-digit names
inline constexpr std::string_view kChunkSuffix = ".inflight-chunks";

std::string chunk_name(std::size_t index);
bool has_chunk_suffix(std::string_view name);

git_oid write_chunk_tree(git_repository* repo, const std::vector<git_oid>& chunks);

// Calls `visit` with each chunk blob's id and its path below `shown` (the
// chunk tree's path, for errors) in file order. Throws
// GitError(hostile_tree) naming the entry when the tree is of neither layout.
void for_each_chunk_id(
    git_repository* repo, const git_tree* chunks, const std::string& shown,
    const std::function<void(const git_oid& blob, const std::string& path)>& visit);

// Calls `sink` with each chunk's bytes in file order; throws as above.
void for_each_chunk(git_repository* repo, const git_tree* chunks, const std::string& shown,
                    const std::function<void(const void* data, std::size_t size)>& sink);

}  // namespace inflight::checkpoint
