// The pack format as the indexer reads it (pack_indexer.cpp) and applies
// its deltas (delta_resolution.cpp): its constants, the limits we hold a
// server's pack to, and the byte helpers both use.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace inflight::checkpoint {

// Object types of the pack format: 1-4 whole, then deltas against an earlier
// object of the pack (6) and against one named by id (7, left to libgit2).
constexpr std::array<std::string_view, 5> kTypeNames = {"", "commit", "tree", "blob", "tag"};
constexpr int kOffsetDelta = 6;
constexpr int kRefDelta = 7;
constexpr std::size_t kPackHeaderSize = 12;
// Seven continuation bytes carry sizes up to 2^53: more is not an object of ours.
constexpr std::size_t kMaxObjectHeader = 8;
// Offsets past this need the index's table of 64-bit offsets: left to libgit2.
constexpr std::uint64_t kMaxOffset = 0x7fffffff;
constexpr std::size_t kInflateBuffer = 64 << 10;
// Offsets of a base below 2^31 take five bytes.
constexpr std::size_t kMaxBaseOffset = 5;
// git's own default for pack.depth, met only where bases were dropped.
constexpr int kMaxDeltaDepth = 50;
// The largest base, delta or result applied: checkpoints hold files of up
// to 64 KiB and 32 KiB chunks, and trees of up to a few hundred KiB.
constexpr std::uint64_t kMaxObjectBytes = 16 << 20;
// The bases kept for the deltas after them.
constexpr std::uint64_t kMaxKeptBases = 64 << 20;
// Applying a pack's deltas may make its objects again (a base dropped from
// those kept), up to this many times what making each once costs.
constexpr std::uint64_t kWorkPerObjectMade = 4;
// A delta's two sizes, as varints.
constexpr std::size_t kMaxDeltaHead = 20;

inline std::uint32_t big_endian(const unsigned char* at) {
  return std::uint32_t{at[0]} << 24 | std::uint32_t{at[1]} << 16 | std::uint32_t{at[2]} << 8 |
         at[3];
}

inline void put_big_endian(std::string& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(value >> shift));
}

inline std::span<const unsigned char> bytes_of(std::string_view text) {
  return {reinterpret_cast<const unsigned char*>(text.data()), text.size()};
}

inline std::string object_header(int type, std::uint64_t size) {
  const std::string header = std::string(kTypeNames.at(type)) + " " + std::to_string(size);
  return {header.c_str(), header.size() + 1};
}

[[noreturn]] inline void not_a_delta() {
  throw std::runtime_error("a delta that does not apply");
}

// A delta's sizes: little-endian varints.
inline std::uint64_t delta_size(std::string_view delta, std::size_t& at) {
  std::uint64_t size = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (at == delta.size()) not_a_delta();
    const auto c = static_cast<unsigned char>(delta[at++]);
    size |= std::uint64_t{c & 0x7fu} << shift;
    if ((c & 0x80) == 0) return size;
  }
  not_a_delta();
}

// git's delta format: the sizes of base and result, then copies from the
// base and inserted bytes.
inline std::string apply_delta(std::string_view base, std::string_view delta) {
  std::size_t at = 0;
  if (delta_size(delta, at) != base.size()) not_a_delta();
  const std::uint64_t size = delta_size(delta, at);
  if (size > kMaxObjectBytes) not_a_delta();
  std::string out;
  out.reserve(size);
  while (at < delta.size()) {
    const auto op = static_cast<unsigned char>(delta[at++]);
    if (op & 0x80) {
      std::uint64_t from = 0, length = 0;
      for (int bit = 0; bit < 7; ++bit) {
        if ((op & (1 << bit)) == 0) continue;
        if (at == delta.size()) not_a_delta();
        const auto c = static_cast<unsigned char>(delta[at++]);
        (bit < 4 ? from : length) |= std::uint64_t{c} << (8 * (bit < 4 ? bit : bit - 4));
      }
      if (length == 0) length = 0x10000;
      if (from > base.size() || length > base.size() - from) not_a_delta();
      out.append(base.substr(from, length));
    } else if (op != 0 && op <= delta.size() - at) {
      out.append(delta.substr(at, op));
      at += op;
    } else {
      not_a_delta();
    }
    if (out.size() > size) not_a_delta();
  }
  if (out.size() != size) not_a_delta();
  return out;
}

}  // namespace inflight::checkpoint
