#include "git/pack_indexer.hpp"

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string_view>

namespace inflight::checkpoint {

namespace {

// Object types of the pack format: 1-4 whole, then deltas against an earlier
// object of the pack (6) and against one named by id (7, left to libgit2).
constexpr std::array<std::string_view, 5> kTypeNames = {"", "commit", "tree", "blob", "tag"};
constexpr int kOffsetDelta = 6;
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

std::uint32_t big_endian(const unsigned char* at) {
  return std::uint32_t{at[0]} << 24 | std::uint32_t{at[1]} << 16 | std::uint32_t{at[2]} << 8 |
         at[3];
}

void put_big_endian(std::string& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(value >> shift));
}

std::span<const unsigned char> bytes_of(std::string_view text) {
  return {reinterpret_cast<const unsigned char*>(text.data()), text.size()};
}

std::string object_header(int type, std::uint64_t size) {
  const std::string header = std::string(kTypeNames.at(type)) + " " + std::to_string(size);
  return {header.c_str(), header.size() + 1};
}

[[noreturn]] void not_a_delta() {
  throw std::runtime_error("a delta that does not apply");
}

// A delta's sizes: little-endian varints.
std::uint64_t delta_size(std::string_view delta, std::size_t& at) {
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
std::string apply_delta(std::string_view base, std::string_view delta) {
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

}  // namespace

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
  } catch (const std::exception&) {
    give_up();  // out of memory or libcrypto: libgit2 indexes it
  }
  if (!bytes.empty() && state_ == State::indexed) give_up();  // bytes past the trailer
  return state_;
}

// Takes a varint's bytes (each but the last with its top bit set) into
// pending_, as far as `bytes` and `max` go; gives up at `max` unended.
std::size_t PackIndexer::take_varint(std::span<const unsigned char> bytes, std::size_t max) {
  std::size_t used = 0;
  while (used < bytes.size() && (pending_.empty() || (pending_.back() & 0x80) != 0)) {
    if (pending_.size() == max) {
      give_up();
      break;
    }
    pending_.push_back(bytes[used++]);
  }
  pack_sha_.update(bytes.first(used));
  offset_ += used;
  return used;
}

// "PACK", version 2 or 3, and the number of objects.
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
  if (!pack || (version != 2 && version != 3) || count_ == 0) give_up();
  part_ = Part::object_header;
  return used;
}

// The type in 3 bits and the inflated size as a little-endian varint.
std::size_t PackIndexer::read_object_header(std::span<const unsigned char> bytes) {
  if (pending_.empty()) object_.offset = static_cast<std::uint32_t>(offset_);
  if (offset_ > kMaxOffset) {
    give_up();
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
  } else {
    give_up();
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
  if (base == nullptr) return give_up(), used;
  base->a_base = true;
  object_.base = base->offset;
  start_inflating();
  return used;
}

void PackIndexer::start_inflating() {
  zlib_ = z_stream{};
  if (inflateInit(&zlib_) != Z_OK) return give_up();
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
    give_up();
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
    give_up();
  return used;
}

PackIndexer::State PackIndexer::resolve_deltas(const PackFile& pack) {
  try {
    Resolution resolution;
    for (const auto& entry : entries_)
      if (entry.type == kOffsetDelta || entry.a_base)
        resolution.budget += kWorkPerObjectMade * work_of(entry);
    for (auto& entry : entries_) {
      if (state_ != State::indexed) break;
      if (entry.type != kOffsetDelta) continue;
      const auto content = content_of(entry, pack, 0, resolution);
      object_sha_.update(bytes_of(object_header(content->type, content->bytes.size())));
      object_sha_.update(bytes_of(content->bytes));
      entry.id = object_sha_.finish();
    }
  } catch (const std::exception&) {
    give_up();
  }
  return state_;
}

// An object's type and bytes: inflated from the pack, and through its chain
// of deltas. Nothing is held while the base is made, so a chain holds at
// most a base, a delta and its result at once, besides the kept bases.
std::shared_ptr<const PackIndexer::Content> PackIndexer::content_of(const Entry& entry,
                                                                    const PackFile& pack, int depth,
                                                                    Resolution& resolution) const {
  if (const auto kept = resolution.kept.find(entry.offset); kept != resolution.kept.end())
    return kept->second;
  if (depth > kMaxDeltaDepth) throw std::runtime_error("a delta chain too long");
  resolution.spend(work_of(entry));
  std::shared_ptr<const Content> made;
  if (entry.type != kOffsetDelta) {
    made = std::make_shared<const Content>(Content{entry.type, inflate_at(entry, pack)});
  } else {
    const auto base = content_of(*find(entry.base), pack, depth + 1, resolution);
    made = std::make_shared<const Content>(
        Content{base->type, apply_delta(base->bytes, inflate_at(entry, pack))});
  }
  if (entry.a_base) resolution.keep(entry.offset, made);
  return made;
}

// Making an object once: its stream read and inflated, and a delta's result.
std::uint64_t PackIndexer::work_of(const Entry& entry) {
  return (entry.end - entry.data) + entry.size + (entry.type == kOffsetDelta ? entry.result : 0);
}

void PackIndexer::Resolution::spend(std::uint64_t bytes_made) {
  work += bytes_made;
  if (work > budget) throw std::runtime_error("applying the deltas made bases again too often");
}

void PackIndexer::Resolution::keep(std::uint32_t offset, std::shared_ptr<const Content> content) {
  if (content->bytes.size() > kMaxKeptBases) return;
  bytes += content->bytes.size();
  kept.emplace(offset, std::move(content));
  order.push_back(offset);
  while (bytes > kMaxKeptBases) {
    bytes -= kept.at(order.front())->bytes.size();
    kept.erase(order.front());
    order.pop_front();
  }
}

// The object's zlib stream, from the pack's bytes between its offsets.
std::string PackIndexer::inflate_at(const Entry& entry, const PackFile& pack) const {
  if (entry.size > kMaxObjectBytes) throw std::runtime_error("an object too large to apply");
  std::string out(entry.size + 1, '\0');  // a byte more, so that a longer stream shows
  std::vector<unsigned char> in(std::min<std::uint64_t>(kInflateBuffer, entry.end - entry.data));
  z_stream zlib{};
  if (inflateInit(&zlib) != Z_OK) throw std::runtime_error("zlib");
  zlib.next_out = reinterpret_cast<unsigned char*>(out.data());
  zlib.avail_out = static_cast<uInt>(out.size());
  int rc = Z_OK;
  for (std::uint64_t at = entry.data; rc == Z_OK && at < entry.end; at += in.size()) {
    const auto piece = std::span(in).first(std::min<std::uint64_t>(in.size(), entry.end - at));
    pack(at, piece);
    zlib.next_in = piece.data();
    zlib.avail_in = static_cast<uInt>(piece.size());
    rc = inflate(&zlib, Z_NO_FLUSH);
  }
  const bool whole = rc == Z_STREAM_END && zlib.total_out == entry.size;
  inflateEnd(&zlib);
  if (!whole) throw std::runtime_error("an object that does not inflate again");
  out.resize(entry.size);
  return out;
}

void PackIndexer::give_up() {
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
