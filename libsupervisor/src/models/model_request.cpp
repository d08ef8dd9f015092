// See model_request.hpp: a request's canonical body and digest.
#include "inflight/supervisor/models/model_request.hpp"

#include <openssl/evp.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "inflight/core/bounded_json.hpp"

namespace inflight::models {

namespace {

// The depth SPEC's bounded parsing allows everywhere else; a request body is no different.
constexpr int kRequestJsonDepth = 64;

// Tells this encoding from any later one, so that a change of scheme never matches old digests.
constexpr std::string_view kDigestScheme = "inflight-request-digest-v1";

// The reference tokens of a JSON pointer (RFC 6901), unescaped; nullopt when `pointer` is not
// one (no leading '/', or a '~' not followed by 0 or 1).
std::optional<std::vector<std::string>> pointer_tokens(std::string_view pointer) {
  if (pointer.empty() || pointer.front() != '/') return std::nullopt;
  std::vector<std::string> tokens(1);
  for (std::size_t i = 1; i < pointer.size(); ++i) {
    const char c = pointer[i];
    if (c == '/') {
      tokens.emplace_back();
    } else if (c != '~') {
      tokens.back() += c;
    } else if (i + 1 < pointer.size() && (pointer[i + 1] == '0' || pointer[i + 1] == '1')) {
      tokens.back() += pointer[++i] == '0' ? '~' : '/';
    } else {
      return std::nullopt;
    }
  }
  return tokens;
}

// The index a token names in an array of `size`, as RFC 6901 writes it (no sign, no leading
// zero), or nullopt when it names none.
std::optional<std::size_t> pointer_array_index(const std::string& token, std::size_t size) {
  if (token.empty() || token.size() > 19 || (token.size() > 1 && token.front() == '0'))
    return std::nullopt;
  std::size_t index = 0;
  for (char c : token) {
    if (c < '0' || c > '9') return std::nullopt;
    index = index * 10 + static_cast<std::size_t>(c - '0');
  }
  return index < size ? std::optional(index) : std::nullopt;
}

// The value a token names inside `parent`, or nullptr.
nlohmann::json* pointer_child(nlohmann::json& parent, const std::string& token) {
  if (parent.is_object()) {
    const auto it = parent.find(token);
    return it == parent.end() ? nullptr : &*it;
  }
  if (parent.is_array()) {
    const auto index = pointer_array_index(token, parent.size());
    return index ? &parent[*index] : nullptr;
  }
  return nullptr;
}

// Removes what `pointer` names, when it names something below the root.
void remove_pointer(nlohmann::json& json, std::string_view pointer) {
  const auto tokens = pointer_tokens(pointer);
  if (!tokens) return;
  nlohmann::json* parent = &json;
  for (std::size_t i = 0; i + 1 < tokens->size() && parent != nullptr; ++i)
    parent = pointer_child(*parent, (*tokens)[i]);
  if (parent == nullptr) return;
  if (parent->is_object()) {
    parent->erase(tokens->back());
  } else if (parent->is_array()) {
    if (const auto index = pointer_array_index(tokens->back(), parent->size()))
      parent->erase(*index);
  }
}

struct DigestContextFree {
  void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
};

// SHA-256 fed one length-prefixed part at a time: the length as 8 bytes, big-endian, then the
// bytes, so a part's end is never where another part's bytes could put it.
class PartsDigest {
 public:
  PartsDigest() : context_(EVP_MD_CTX_new()) {
    // Fetched once: OpenSSL 3 fetches EVP_sha256() again at each init, under a lock.
    static EVP_MD* const kSha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    if (!context_ || !kSha256 || EVP_DigestInit_ex(context_.get(), kSha256, nullptr) != 1)
      throw std::runtime_error("SHA-256 is not available");
  }
  void part(std::string_view bytes) {
    unsigned char length[8];
    for (int i = 0; i < 8; ++i)
      length[i] =
          static_cast<unsigned char>(static_cast<std::uint64_t>(bytes.size()) >> (56 - 8 * i));
    update(length, sizeof length);
    update(bytes.data(), bytes.size());
  }
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    if (EVP_DigestFinal_ex(context_.get(), digest, &size) != 1)
      throw std::runtime_error("SHA-256 failed");
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < size; ++i) {
      out += kDigits[digest[i] >> 4];
      out += kDigits[digest[i] & 0xf];
    }
    return out;
  }

 private:
  void update(const void* data, std::size_t size) {
    if (EVP_DigestUpdate(context_.get(), data, size) != 1)
      throw std::runtime_error("SHA-256 failed");
  }
  std::unique_ptr<EVP_MD_CTX, DigestContextFree> context_;
};

}  // namespace

std::string canonical_body(std::string_view body, const std::vector<std::string>& ignore_fields) {
  const JsonLimits limits{.max_bytes = body.size(), .max_depth = kRequestJsonDepth};
  if (ignore_fields.empty()) {
    auto canonical = canonical_json(body, limits);
    return canonical ? std::move(*canonical) : std::string(body);
  }
  // Fields to drop are found in the document: nlohmann::json keeps an object's keys in a
  // std::map, sorted bytewise, and dump() writes what canonical_json writes.
  auto parsed = parse_bounded_json_sorted(body, limits);
  if (!parsed) return std::string(body);
  for (const auto& pointer : ignore_fields) remove_pointer(*parsed, pointer);
  return parsed->dump();
}

std::string request_digest(const RequestParts& parts,
                           const std::vector<std::string>& ignore_fields) {
  PartsDigest digest;
  digest.part(kDigestScheme);
  digest.part(parts.model);
  digest.part(parts.method);
  digest.part(parts.path);
  digest.part(parts.query);
  digest.part(std::to_string(parts.identity_headers.size()));
  for (const auto& [name, value] : parts.identity_headers) {
    digest.part(name);
    digest.part(value);
  }
  digest.part(canonical_body(parts.body, ignore_fields));
  return digest.hex();
}

}  // namespace inflight::models
