// PackIndexer (pack_indexer.hpp): a pack read as it streams in, each object
// checked and hashed, and the index written; delta_resolution.cpp applies its
// deltas.
#include "git/pack_indexer.hpp"

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string_view>

#include "git/pack_format.hpp"

namespace inflight::checkpoint {

Sha1::Sha1() : context_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
  if (!context_ || EVP_DigestInit_ex(context_.get(), EVP_sha1(), nullptr) != 1)
    throw std::runtime_error("libcrypto cannot start a SHA-1");
}

void Sha1::update(std::span<const unsigned char> bytes) {
  if (EVP_DigestUpdate(context_.get(), bytes.data(), bytes.size()) != 1)
    throw std::runtime_error("libcrypto's SHA-1 failed");
}

Sha1Digest Sha1::finish() {
  Sha1Digest digest{};
  unsigned int size = 0;
  if (EVP_DigestFinal_ex(context_.get(), digest.data(), &size) != 1 || size != digest.size() ||
      EVP_DigestInit_ex(context_.get(), EVP_sha1(), nullptr) != 1)
    throw std::runtime_error("libcrypto's SHA-1 failed");
  return digest;
}

PackIndexer::PackIndexer() : inflated_(kInflateBuffer) {}

PackIndexer::~PackIndexer() {
  if (inflating_) inflateEnd(&zlib_);
}

PackIndexer::State PackIndexer::read(std::span<const unsigned char> bytes) {
  try {
    while (!bytes.empty() && state_ == State::reading) {
      switch (part_) {
        case Part::pack_header:
          bytes = bytes.subspan(read_pack_header(bytes));
          break;
        case Part::object_header:
          bytes = bytes.subspan(read_object_header(bytes));
          break;
        case Part::base_offset:
          bytes = bytes.subspan(read_base_offset(bytes));
          break;
        case Part::object_data:
          bytes = bytes.subspan(read_object_data(bytes));
          break;
        case Part::trailer:
          bytes = bytes.subspan(read_trailer(bytes));
          break;
      }
    }
  } catch (const std::exception& e) {
    give_up(std::string("cannot index it here: ") + e.what());  // memory, libcrypto, a bad delta
  }
  if (!bytes.empty() && state_ == State::indexed) give_up("bytes past the pack's checksum");
  return state_;
}

// Takes a varint's bytes (each but the last with its top bit set) into
// pending_, as far as `bytes` and `max` go; gives up at `max` unended.
std::size_t PackIndexer::take_varint(std::span<const unsigned char> bytes, std::size_t max) {
  std::size_t used = 0;
  while (used < bytes.size() && (pending_.empty() || (pending_.back() & 0x80) != 0)) {
    if (pending_.size() == max) {
      give_up("an object header or offset longer than git writes");
      break;
    }
    pending_.push_back(bytes[used++]);
  }
  pack_sha_.update(bytes.first(used));
  offset_ += used;
  return used;
}

// "PACK", version 2, and the number of objects. git writes version 3 too, but
// libgit2 1.5's indexer refuses it ("wrong pack version"): ours must never take
// a pack libgit2 would refuse (the pack indexer's fuzz target found this one).
std::size_t PackIndexer::read_pack_header(std::span<const unsigned char> bytes) {
  const std::size_t used = std::min(kPackHeaderSize - pending_.size(), bytes.size());
  pending_.insert(pending_.end(), bytes.begin(), bytes.begin() + used);
  pack_sha_.update(bytes.first(used));
  offset_ += used;
  if (pending_.size() < kPackHeaderSize) return used;
  const std::uint32_t version = big_endian(&pending_[4]);
  count_ = big_endian(&pending_[8]);
  const bool pack = std::equal(pending_.begin(), pending_.begin() + 4, "PACK");
  pending_.clear();
  // An empty pack is left to libgit2 too: there is nothing to gain.
  if (!pack || version != 2)
    give_up("not a pack of version 2");
  else if (count_ == 0)
    give_up("an empty pack");
  part_ = Part::object_header;
  return used;
}

// The type in 3 bits and the inflated size as a little-endian varint.
std::size_t PackIndexer::read_object_header(std::span<const unsigned char> bytes) {
  if (pending_.empty()) object_.offset = static_cast<std::uint32_t>(offset_);
  if (offset_ > kMaxOffset) {
    give_up("a pack past 2 GiB");
    return 0;
  }
  const std::size_t used = take_varint(bytes, kMaxObjectHeader);
  if (pending_.back() & 0x80) return used;
  const int type = (pending_[0] >> 4) & 7;
  std::uint64_t size = pending_[0] & 15;
  for (std::size_t i = 1; i < pending_.size(); ++i)
    size |= std::uint64_t{pending_[i] & 0x7fu} << (4 + 7 * (i - 1));
  object_.crc =
      static_cast<std::uint32_t>(crc32(0, pending_.data(), static_cast<uInt>(pending_.size())));
  pending_.clear();
  object_.type = type;
  object_.size = size;
  if (type == kOffsetDelta) {
    part_ = Part::base_offset;
  } else if (type >= 1 && type < static_cast<int>(kTypeNames.size())) {
    object_sha_.update(bytes_of(object_header(type, size)));
    start_inflating();
  } else if (type == kRefDelta) {
    give_up("a thin pack (a delta against an object named by id)");
  } else {
    give_up("an object of unknown type " + std::to_string(type));
  }
  return used;
}

// How far back the delta's base starts: a big-endian varint, each
// continuation adding one (git's offset encoding). The base must be an
// object read already.
std::size_t PackIndexer::read_base_offset(std::span<const unsigned char> bytes) {
  const std::size_t used = take_varint(bytes, kMaxBaseOffset);
  object_.crc =
      static_cast<std::uint32_t>(crc32(object_.crc, bytes.data(), static_cast<uInt>(used)));
  if (pending_.back() & 0x80) return used;
  std::uint64_t back = pending_[0] & 0x7fu;
  for (std::size_t i = 1; i < pending_.size(); ++i)
    back = ((back + 1) << 7) | (pending_[i] & 0x7fu);
  pending_.clear();
  Entry* base = back == 0 || back > object_.offset ? nullptr : find(object_.offset - back);
  if (base == nullptr) return give_up("a delta whose base is not an object of the pack"), used;
  base->a_base = true;
  object_.base = base->offset;
  start_inflating();
  return used;
}

void PackIndexer::start_inflating() {
  zlib_ = z_stream{};
  if (inflateInit(&zlib_) != Z_OK) return give_up("zlib cannot start");
  inflating_ = true;
  object_.data = static_cast<std::uint32_t>(offset_);
  object_.result = object_.size;
  delta_head_.clear();
  part_ = Part::object_data;
}

const PackIndexer::Entry* PackIndexer::find(std::uint64_t offset) const {
  const auto it = std::lower_bound(entries_.begin(), entries_.end(), offset,
                                   [](const Entry& e, std::uint64_t at) { return e.offset < at; });
  return it != entries_.end() && it->offset == offset ? &*it : nullptr;
}

// The object's zlib stream, which must inflate to exactly its header's size.
std::size_t PackIndexer::read_object_data(std::span<const unsigned char> bytes) {
  zlib_.next_in = const_cast<unsigned char*>(bytes.data());
  zlib_.avail_in = static_cast<uInt>(std::min<std::size_t>(bytes.size(), UINT_MAX));
  const std::size_t offered = zlib_.avail_in;
  int rc = Z_OK;
  do {
    zlib_.next_out = inflated_.data();
    zlib_.avail_out = static_cast<uInt>(inflated_.size());
    rc = inflate(&zlib_, Z_NO_FLUSH);
    if (zlib_.total_out > object_.size) rc = Z_DATA_ERROR;
    const auto out = std::span(inflated_).first(inflated_.size() - zlib_.avail_out);
    if (object_.type != kOffsetDelta)
      object_sha_.update(out);
    else if (delta_head_.size() < kMaxDeltaHead)
      delta_head_.append(out.begin(),
                         out.begin() + std::min(out.size(), kMaxDeltaHead - delta_head_.size()));
  } while (rc == Z_OK && (zlib_.avail_in > 0 || zlib_.avail_out == 0));
  const std::size_t used = offered - zlib_.avail_in;
  object_.crc =
      static_cast<std::uint32_t>(crc32(object_.crc, bytes.data(), static_cast<uInt>(used)));
  pack_sha_.update(bytes.first(used));
  offset_ += used;
  if (rc == Z_STREAM_END && zlib_.total_out == object_.size) {
    end_object();
  } else if (rc != Z_OK && !(rc == Z_BUF_ERROR && zlib_.avail_in == 0)) {
    give_up("an object's zlib data is bad or not of its size");
  }
  return used;
}

// A delta's head: the size of its base, which must be its base's, and of
// what it makes, for the bound on the work of applying the pack's deltas.
void PackIndexer::check_delta_sizes() {
  std::size_t at = 0;
  const std::uint64_t base_size = delta_size(delta_head_, at);
  object_.result = delta_size(delta_head_, at);
  if (base_size != find(object_.base)->result || base_size > kMaxObjectBytes ||
      object_.result > kMaxObjectBytes || object_.size > kMaxObjectBytes)
    not_a_delta();
}

void PackIndexer::end_object() {
  inflateEnd(&zlib_);
  inflating_ = false;
  if (object_.type == kOffsetDelta)
    check_delta_sizes();
  else
    object_.id = object_sha_.finish();  // a delta's once applied
  object_.end = static_cast<std::uint32_t>(offset_);
  object_.a_base = false;
  entries_.push_back(object_);
  part_ = entries_.size() == count_ ? Part::trailer : Part::object_header;
}

// The SHA-1 of every byte before it.
std::size_t PackIndexer::read_trailer(std::span<const unsigned char> bytes) {
  const std::size_t used = std::min(checksum_.size() - pending_.size(), bytes.size());
  pending_.insert(pending_.end(), bytes.begin(), bytes.begin() + used);
  offset_ += used;
  if (pending_.size() < checksum_.size()) return used;
  checksum_ = pack_sha_.finish();
  if (std::equal(checksum_.begin(), checksum_.end(), pending_.begin()))
    state_ = State::indexed;
  else
    give_up("the pack's checksum does not match");
  return used;
}

void PackIndexer::give_up(std::string why) {
  if (state_ != State::given_up) why_given_up_ = std::move(why);
  state_ = State::given_up;
  if (inflating_) inflateEnd(&zlib_);
  inflating_ = false;
  entries_ = {};
}

std::optional<std::string> PackIndexer::index_file() const {
  auto entries = entries_;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.id < b.id; });
  if (std::adjacent_find(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        return a.id == b.id;
      }) != entries.end())
    return std::nullopt;
  std::string index = "\377tOc";
  put_big_endian(index, 2);
  auto first_bytes = entries.begin();
  for (int byte = 0; byte < 256; ++byte) {
    first_bytes =
        std::find_if(first_bytes, entries.end(), [byte](const Entry& e) { return e.id[0] > byte; });
    put_big_endian(index, static_cast<std::uint32_t>(first_bytes - entries.begin()));
  }
  for (const auto& e : entries) index.append(e.id.begin(), e.id.end());
  for (const auto& e : entries) put_big_endian(index, e.crc);
  for (const auto& e : entries) put_big_endian(index, e.offset);
  index.append(checksum_.begin(), checksum_.end());
  Sha1 sha;
  sha.update(bytes_of(index));
  const Sha1Digest own = sha.finish();
  index.append(own.begin(), own.end());
  return index;
}

}  // namespace inflight::checkpoint
