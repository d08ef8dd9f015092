// Packs made by hand, byte by byte as git's pack format has them, so that
// tests can make each malformation a server could send.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "git/pack_indexer.hpp"

namespace inflight::checkpoint {

constexpr int kBlobType = 3;

class TestPack {
 public:
  // Each returns the object's offset.
  std::uint64_t whole(int type, std::string_view content) {
    return object(type, content.size(), {}, compressed(content));
  }
  std::uint64_t offset_delta(std::uint64_t base, std::string_view delta) {
    const std::uint64_t at = offset();
    std::uint64_t back = at - base;
    std::string encoded(1, static_cast<char>(back & 0x7f));
    while (back >>= 7) encoded.insert(encoded.begin(), static_cast<char>(0x80 | (--back & 0x7f)));
    return object(6, delta.size(), encoded, compressed(delta));
  }
  std::uint64_t ref_delta(const Sha1Digest& base, std::string_view delta) {
    return object(7, delta.size(), std::string(base.begin(), base.end()), compressed(delta));
  }
  // Any object's header, base and zlib bytes as given.
  std::uint64_t object(int type, std::uint64_t size, const std::string& base,
                       const std::string& data) {
    const std::uint64_t at = offset();
    unsigned char c = static_cast<unsigned char>(type << 4 | (size & 15));
    for (size >>= 4; size != 0; size >>= 7) {
      body_.push_back(static_cast<char>(c | 0x80));
      c = size & 0x7f;
    }
    body_.push_back(static_cast<char>(c));
    body_ += base + data;
    ++count_;
    return at;
  }

  // Header, objects and the SHA-1 trailer.
  std::vector<unsigned char> bytes(std::uint32_t version = 2) const {
    std::string pack = "PACK";
    for (const std::uint32_t word : {version, count_})
      for (int shift = 24; shift >= 0; shift -= 8) pack.push_back(static_cast<char>(word >> shift));
    pack += body_;
    Sha1 sha;
    sha.update({reinterpret_cast<const unsigned char*>(pack.data()), pack.size()});
    const Sha1Digest trailer = sha.finish();
    pack.append(trailer.begin(), trailer.end());
    return {pack.begin(), pack.end()};
  }

  static std::string compressed(std::string_view content) {
    uLongf size = compressBound(content.size());
    std::string out(size, '\0');
    compress(reinterpret_cast<Bytef*>(out.data()), &size,
             reinterpret_cast<const Bytef*>(content.data()), content.size());
    out.resize(size);
    return out;
  }

  // A delta from a base of `base_size` bytes to `result_size`: the sizes, then `ops`.
  static std::string delta(std::size_t base_size, std::size_t result_size, std::string_view ops) {
    std::string d;
    for (std::size_t size : {base_size, result_size}) {
      for (; size >= 0x80; size >>= 7) d.push_back(static_cast<char>(0x80 | (size & 0x7f)));
      d.push_back(static_cast<char>(size));
    }
    return d + std::string(ops);
  }
  // A copy of [from, from + length) of the base, then `insert`.
  static std::string delta(std::size_t base_size, std::size_t result_size, std::uint32_t from,
                           std::uint32_t length, std::string_view insert) {
    return delta(base_size, result_size, copy(from, length) + inserted(insert));
  }
  // Delta ops: the offset's and the length's bytes that are not zero.
  static std::string copy(std::uint32_t from, std::uint32_t length) {
    std::string op(1, '\x80');
    for (int i = 0; i < 7; ++i) {
      const auto byte = static_cast<char>((i < 4 ? from >> 8 * i : length >> 8 * (i - 4)) & 0xff);
      if (byte == 0) continue;
      op[0] = static_cast<char>(op[0] | 1 << i);
      op += byte;
    }
    return op;
  }
  static std::string inserted(std::string_view text) {
    return text.empty() ? "" : static_cast<char>(text.size()) + std::string(text);
  }

 private:
  std::uint64_t offset() const { return 12 + body_.size(); }

  std::string body_;
  std::uint32_t count_ = 0;
};

}  // namespace inflight::checkpoint
