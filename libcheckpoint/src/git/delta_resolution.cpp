// PackIndexer's deltas (pack_indexer.hpp): each object of the pack made
// through its chain of bases, within the limits on bytes kept and work done,
// and hashed for the index.
#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string_view>

#include "git/pack_format.hpp"
#include "git/pack_indexer.hpp"

namespace inflight::checkpoint {

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
  } catch (const std::exception& e) {
    give_up(std::string("a delta cannot be made here: ") + e.what());
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

}  // namespace inflight::checkpoint
