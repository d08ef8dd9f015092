// Indexes a pack as a download receives it, for the common case of a
// restore: whole objects (checkpoints are pushed without deltas) and deltas
// against objects of the same pack (a server's own: between commits, and
// between chunks it holds loose or repacked). Each
// whole object is inflated once and hashed with libcrypto's SHA-1, which
// uses the CPU's SHA instructions, where libgit2's indexer (built with
// collision detection) spent half of a 200 MB restore's CPU (docs/checkpoints.md "How checkpoints
// are stored"); deltas are applied once the pack is whole, reading their bases back from its file.
// The pack is untrusted: whatever this does not index (a thin pack's deltas against objects outside
// it, anything malformed, a pack past 2 GiB, an object past 16 MiB to apply a delta with, deltas
// that would make their bases again more than 4 times over) it gives up at once, and the caller
// hands the whole pack to libgit2's indexer, whose verdict stands.
//
// The writer of git's pack index, version 2 (git's gitformat-pack), is here
// too; its reader is libgit2's.
#pragma once

#include <openssl/evp.h>
#include <zlib.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace inflight::checkpoint {

using Sha1Digest = std::array<unsigned char, 20>;

// libcrypto's SHA-1 over pieces; throws std::runtime_error when libcrypto fails.
class Sha1 {
 public:
  Sha1();
  void update(std::span<const unsigned char> bytes);
  Sha1Digest finish();  // and starts over

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context_;
};

class PackIndexer {
 public:
  enum class State { reading, indexed, given_up };

  PackIndexer();
  ~PackIndexer();
  PackIndexer(const PackIndexer&) = delete;
  PackIndexer& operator=(const PackIndexer&) = delete;

  // The next bytes of the pack; `indexed` once its trailer checked out.
  State read(std::span<const unsigned char> bytes);
  // Fills a buffer with the pack's bytes from an offset, or throws.
  using PackFile = std::function<void(std::uint64_t offset, std::span<unsigned char> out)>;
  // Once indexed: applies the deltas to their bases, read back from `pack`,
  // and gives up when one does not apply.
  State resolve_deltas(const PackFile& pack);
  State state() const { return state_; }
  // Once given up: why, in words for an operator (the first reason).
  const std::string& why_given_up() const { return why_given_up_; }

  std::uint32_t objects() const { return count_; }
  std::uint32_t objects_read() const { return static_cast<std::uint32_t>(entries_.size()); }
  // Once indexed: the pack's own checksum, which names its files.
  const Sha1Digest& checksum() const { return checksum_; }
  // Once indexed: the .idx file, or none when two objects share an id.
  std::optional<std::string> index_file() const;

 private:
  struct Entry {
    Sha1Digest id;
    std::uint32_t crc;
    std::uint32_t offset;
    int type;              // 1-4, or 6 for a delta against the object at `base`
    std::uint32_t base;    // an offset
    std::uint32_t data;    // the offset of its zlib stream
    std::uint32_t end;     // and of the next object
    std::uint64_t size;    // inflated
    std::uint64_t result;  // what it makes: its size, or a delta's result
    bool a_base;           // of a delta
  };
  struct Content {
    int type;
    std::string bytes;
  };
  // What applying a pack's deltas holds: the bases made, by offset, so that
  // each is inflated or made once while they fit in a bound (the oldest go
  // first), and the bytes made against a bound on the work.
  struct Resolution {
    void keep(std::uint32_t offset, std::shared_ptr<const Content> content);
    void spend(std::uint64_t bytes_made);  // throws past the budget

    std::unordered_map<std::uint32_t, std::shared_ptr<const Content>> kept;
    std::deque<std::uint32_t> order;
    std::uint64_t bytes = 0;
    std::uint64_t work = 0;
    std::uint64_t budget = 0;
  };

  std::size_t take_varint(std::span<const unsigned char> bytes, std::size_t max);
  std::size_t read_pack_header(std::span<const unsigned char> bytes);
  std::size_t read_object_header(std::span<const unsigned char> bytes);
  std::size_t read_object_data(std::span<const unsigned char> bytes);
  std::size_t read_trailer(std::span<const unsigned char> bytes);
  std::size_t read_base_offset(std::span<const unsigned char> bytes);
  void start_inflating();
  const Entry* find(std::uint64_t offset) const;
  Entry* find(std::uint64_t offset) {
    return const_cast<Entry*>(std::as_const(*this).find(offset));
  }
  std::shared_ptr<const Content> content_of(const Entry& entry, const PackFile& pack, int depth,
                                            Resolution& resolution) const;
  std::string inflate_at(const Entry& entry, const PackFile& pack) const;
  void check_delta_sizes();
  static std::uint64_t work_of(const Entry& entry);
  void end_object();
  void give_up(std::string why);

  enum class Part { pack_header, object_header, base_offset, object_data, trailer };
  State state_ = State::reading;
  std::string why_given_up_;
  Part part_ = Part::pack_header;
  std::vector<unsigned char> pending_;  // a header or trailer read in part
  std::uint64_t offset_ = 0;            // of the next byte: the pack's size at the end
  std::uint32_t count_ = 0;
  Sha1 pack_sha_;
  Sha1 object_sha_;
  z_stream zlib_{};
  bool inflating_ = false;
  Entry object_{};
  std::vector<Entry> entries_;
  std::vector<unsigned char> inflated_;  // the zlib output of the moment, hashed and dropped
  std::string delta_head_;               // the first bytes a delta inflates to
  Sha1Digest checksum_{};
};

}  // namespace inflight::checkpoint
