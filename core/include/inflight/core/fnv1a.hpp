// FNV-1a, 64 bits: a cheap fingerprint to notice that something changed (a
// run dir's metadata, a template). Never a defence against a chosen input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace inflight {

class Fnv1a {
 public:
  void mix(const void* data, std::size_t size) {
    for (std::size_t i = 0; i < size; ++i) {
      hash_ ^= static_cast<const unsigned char*>(data)[i];
      hash_ *= 1099511628211ull;
    }
  }
  void mix(std::string_view text) { mix(text.data(), text.size()); }
  std::uint64_t value() const { return hash_; }

 private:
  std::uint64_t hash_ = 14695981039346656037ull;
};

}  // namespace inflight
