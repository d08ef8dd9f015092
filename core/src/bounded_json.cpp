// See bounded_json.hpp: JSON read within limits, UTF-8 checks, and JSON strings written byte
// for byte as nlohmann dumps them.
#include "inflight/core/bounded_json.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <optional>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace inflight {

namespace {

// The deepest nesting of `text`'s arrays and objects, stopping early once it
// passes `limit`; brackets inside strings do not count.
int nesting_depth(std::string_view text, int limit) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) break;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// Length of the valid UTF-8 sequence at `text[0]`, or 0 when it is not one.
std::size_t utf8_sequence(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;   // overlong
    if (lead == 0xed) high = 0x9f;  // surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;   // overlong
    if (lead == 0xf4) high = 0x8f;  // above U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i)
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  return length;
}

}  // namespace

namespace {

Error refused(std::string message) {
  return Error{.kind = Failure::other, .message = std::move(message), .candidates = {}};
}

// Why `text` is not parsed at all, before any parser runs.
std::optional<Error> over_limits(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes)
    return refused("larger than " + std::to_string(limits.max_bytes) + " bytes");
  if (nesting_depth(text, limits.max_depth) > limits.max_depth)
    return refused("nested deeper than " + std::to_string(limits.max_depth) + " levels");
  return std::nullopt;
}

Error not_parsed(std::string_view text) {
  return refused(is_valid_utf8(text) ? "not valid JSON" : "not valid UTF-8");
}

template <class Json>
Result<Json> parse_within(std::string_view text, const JsonLimits& limits) {
  if (auto error = over_limits(text, limits)) return *error;
  auto json = Json::parse(text, nullptr, false);
  if (json.is_discarded()) return not_parsed(text);
  return json;
}

// The canonical text written from the parser's events (nlohmann's SAX interface): scalars and
// arrays go out as they come; an object's members are written one after another without their
// keys, each noted with its key, and put in key order with their keys at the object's end. The
// keys compared are the parsed ones, as a std::map compares them: their escaped forms may sort
// otherwise ("\n" against " ").
class CanonicalWriter {
 public:
  using Json = nlohmann::json;

  bool null() { return scalar("null"); }
  bool boolean(bool value) { return scalar(value ? "true" : "false"); }
  bool number_integer(Json::number_integer_t value) { return number(value); }
  bool number_unsigned(Json::number_unsigned_t value) { return number(value); }
  // nlohmann's own float text (its shortest form, with ".0" when whole): rare in a request.
  bool number_float(Json::number_float_t value, const Json::string_t&) {
    return scalar(Json(value).dump());
  }
  bool string(Json::string_t& value) {
    value_starts();
    append_utf8_json_string(out_, value);
    return true;
  }
  bool binary(Json::binary_t&) { return false; }  // JSON text has none
  bool start_object(std::size_t) {
    value_starts();
    open_.push_back({.object = true,
                     .start = out_.size(),
                     .first_member = members_.size(),
                     .first_key = keys_.size()});
    return true;
  }
  bool key(Json::string_t& key) {
    members_.push_back({.key = keys_.size(), .key_size = key.size(), .value = out_.size()});
    keys_ += key;
    return true;
  }
  bool end_object();
  bool start_array(std::size_t) {
    value_starts();
    open_.push_back({.object = false, .start = out_.size()});
    out_ += '[';
    return true;
  }
  bool end_array() {
    out_ += ']';
    open_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }

  std::string take() { return std::move(out_); }

 private:
  struct Open {
    bool object;
    std::size_t start;  // of its text in out_
    std::size_t first_member = 0, first_key = 0;
    std::size_t values = 0;  // an array's so far
  };
  struct Member {
    std::size_t key, key_size;  // in keys_
    std::size_t value;          // where its value starts in out_; it ends where the next starts
  };

  void value_starts() {
    if (open_.empty() || open_.back().object) return;
    if (open_.back().values++ > 0) out_ += ',';
  }
  bool scalar(std::string_view text) {
    value_starts();
    out_ += text;
    return true;
  }
  template <class N>
  bool number(N value) {
    char digits[24];
    return scalar({digits, static_cast<std::size_t>(
                               std::to_chars(digits, std::end(digits), value).ptr - digits)});
  }
  std::string_view key_of(const Member& member) const {
    return std::string_view(keys_).substr(member.key, member.key_size);
  }

  std::string out_;
  std::vector<Open> open_;
  std::vector<Member> members_;  // of the objects open, the innermost's last
  std::string keys_;
  std::vector<std::size_t> order_;  // end_object's, kept for its capacity
  std::string object_;
};

// A key given twice keeps its last value, as nlohmann's std::map does: a stable sort keeps the
// members of one key in the order given, and the last of them is written.
bool CanonicalWriter::end_object() {
  const auto open = open_.back();
  open_.pop_back();
  const std::size_t count = members_.size() - open.first_member;
  const auto member = [&](std::size_t i) -> const Member& {
    return members_[open.first_member + i];
  };
  const auto value_end = [&](std::size_t i) {
    return i + 1 < count ? member(i + 1).value : out_.size();
  };
  order_.resize(count);
  for (std::size_t i = 0; i < count; ++i) order_[i] = i;
  std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) {
    return key_of(member(a)) < key_of(member(b));
  });
  object_.assign(1, '{');
  for (std::size_t k = 0; k < count; ++k) {
    const auto i = order_[k];
    if (k + 1 < count && key_of(member(order_[k + 1])) == key_of(member(i))) continue;
    if (object_.size() > 1) object_ += ',';
    append_utf8_json_string(object_, key_of(member(i)));
    object_ += ':';
    object_.append(out_, member(i).value, value_end(i) - member(i).value);
  }
  object_ += '}';
  out_.resize(open.start);
  out_ += object_;
  members_.resize(open.first_member);
  keys_.resize(open.first_key);
  return true;
}

}  // namespace

Result<nlohmann::ordered_json> parse_bounded_json(std::string_view text, const JsonLimits& limits) {
  return parse_within<nlohmann::ordered_json>(text, limits);
}

Result<nlohmann::json> parse_bounded_json_sorted(std::string_view text, const JsonLimits& limits) {
  return parse_within<nlohmann::json>(text, limits);
}

Result<std::string> canonical_json(std::string_view text, const JsonLimits& limits) {
  if (auto error = over_limits(text, limits)) return *error;
  CanonicalWriter writer;
  if (!nlohmann::json::sax_parse(text, &writer)) return not_parsed(text);
  return writer.take();
}

bool is_valid_utf8(std::string_view text) {
  while (!text.empty()) {
    // Text is mostly ASCII: skip it eight bytes at a time.
    std::uint64_t word;
    while (text.size() >= sizeof word) {
      std::memcpy(&word, text.data(), sizeof word);
      if (word & 0x8080808080808080u) break;
      text.remove_prefix(sizeof word);
    }
    if (text.empty()) break;
    // An ASCII byte of the tail, or of a short string, without a call.
    const auto length = static_cast<unsigned char>(text[0]) < 0x80 ? 1 : utf8_sequence(text);
    if (length == 0) return false;
    text.remove_prefix(length);
  }
  return true;
}

namespace {

// How many bytes each byte takes once escaped: 1 as it is, 2 as `\n`, 6 as `\u001f`.
constexpr std::array<std::uint8_t, 256> kEscapedWidth = [] {
  std::array<std::uint8_t, 256> width{};
  for (std::size_t c = 0; c < width.size(); ++c) width[c] = c < 0x20 ? 6 : 1;
  for (const unsigned char c : {'"', '\\', '\b', '\f', '\n', '\r', '\t'}) width[c] = 2;
  return width;
}();

char escape_letter(unsigned char c) {
  switch (c) {
    case '\b':
      return 'b';
    case '\f':
      return 'f';
    case '\n':
      return 'n';
    case '\r':
      return 'r';
    case '\t':
      return 't';
    default:
      return static_cast<char>(c);  // '"' and '\\'
  }
}

// Writes the escape of `byte`, one that kEscapedWidth does not keep as it is, at `to`.
char* append_escape(char* to, unsigned char byte) {
  *to++ = '\\';
  if (kEscapedWidth[byte] == 2) {
    *to++ = escape_letter(byte);
    return to;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  to = std::copy_n("u00", 3, to);
  *to++ = kHex[byte >> 4];
  *to++ = kHex[byte & 0xf];
  return to;
}

// Text is escaped a block of kBlock bytes at a time, led by the block's mask of bytes to escape.
constexpr std::size_t kBlock = 16;

// One block of text: the writer copies a whole block's width from any place of it in one move,
// where the copy of each short run between escapes cost a call. So 2 * kBlock bytes from the
// block's start are read: the text's own where it has them (a copy of each block took a third
// of the time), else a copy with zeros past the text's end (the blocks that start within its last
// 31 bytes).
struct Block {
  Block(std::string_view text, std::size_t at) : size(std::min(kBlock, text.size() - at)) {
    if (text.size() - at >= 2 * kBlock) {
      bytes = text.data() + at;
    } else {
      padded.fill(0);
      std::memcpy(padded.data(), text.data() + at, text.size() - at);
      bytes = padded.data();
    }
    mask = escape_mask() & ((std::uint32_t{1} << size) - 1);
  }

  Block(const Block&) = delete;  // `bytes` may point into the block itself
  Block& operator=(const Block&) = delete;

  const char* bytes;
  std::size_t size;
  std::uint32_t mask;  // bit i: bytes[i] is escaped

 private:
  std::array<char, 2 * kBlock> padded;

#if defined(__SSE2__)  // every x86-64: the whole block at once
  std::uint32_t escape_mask() const {
    const __m128i chars = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes));
    const __m128i quote = _mm_cmpeq_epi8(chars, _mm_set1_epi8('"'));
    const __m128i backslash = _mm_cmpeq_epi8(chars, _mm_set1_epi8('\\'));
    // A byte below 0x20 is its own minimum with 0x1f (unsigned).
    const __m128i control = _mm_cmpeq_epi8(_mm_min_epu8(chars, _mm_set1_epi8(0x1f)), chars);
    return static_cast<std::uint32_t>(
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)));
  }
#else
  std::uint32_t escape_mask() const {
    std::uint32_t found = 0;
    for (std::size_t i = 0; i < kBlock; ++i)
      if (kEscapedWidth[static_cast<unsigned char>(bytes[i])] != 1) found |= 1u << i;
    return found;
  }
#endif
};

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  if (is_valid_utf8(text)) return append_utf8_json_string(out, text);
  out += nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void append_utf8_json_string(std::string& out, std::string_view text) {
  if (text.size() < 2 * kBlock) {
    // A byte at a time into a buffer of the widest escape: a call writes some fifty short strings
    // (keys, names, the log's fields), and a block's setup cost each more than its bytes did.
    std::array<char, 2 + 6 * 2 * kBlock> escaped;
    char* to = escaped.data();
    *to++ = '"';
    for (const char c : text) {
      const auto byte = static_cast<unsigned char>(c);
      if (kEscapedWidth[byte] == 1)
        *to++ = c;
      else
        to = append_escape(to, byte);
    }
    *to++ = '"';
    out.append(escaped.data(), to);
    return;
  }
  // Measured first, then written in place, plain runs copied whole: an answer of a few KB has a
  // quote every few bytes, and an append per escape cost more than the two passes.
  std::size_t width = 2 + text.size();
  for (std::size_t at = 0; at < text.size(); at += kBlock) {
    const Block block(text, at);
    for (auto mask = block.mask; mask != 0; mask &= mask - 1)
      width += kEscapedWidth[static_cast<unsigned char>(block.bytes[std::countr_zero(mask)])] - 1;
  }
  const auto start = out.size();
  out.resize(start + width + kBlock);  // a block's copy may pass the end: cut below
  char* to = out.data() + start;
  *to++ = '"';
  for (std::size_t at = 0; at < text.size(); at += kBlock) {
    const Block block(text, at);
    std::size_t copied = 0;
    for (auto mask = block.mask; mask != 0; mask &= mask - 1) {
      const auto i = static_cast<std::size_t>(std::countr_zero(mask));
      std::memcpy(to, block.bytes + copied, kBlock);  // the run up to i, and more
      to = append_escape(to + (i - copied), static_cast<unsigned char>(block.bytes[i]));
      copied = i + 1;
    }
    std::memcpy(to, block.bytes + copied, kBlock);
    to += block.size - copied;
  }
  *to = '"';
  out.resize(start + width);
}

std::string printable(std::string_view text) {
  std::string out;
  while (!text.empty()) {
    auto length = utf8_sequence(text);
    if (length > 0) {
      out.append(text.substr(0, length));
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(text[0]));
      out += escaped;
      length = 1;
    }
    text.remove_prefix(length);
  }
  return out;
}

}  // namespace inflight
