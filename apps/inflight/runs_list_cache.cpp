// See runs_list_cache.hpp.
#include "runs_list_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "inflight/core/bounded_json.hpp"
#include "inflight/core/fd.hpp"
#include "inflight/core/run_dir.hpp"

namespace inflight::app {

namespace {

constexpr std::string_view kHeader = "inflight runs list cache 1\n";
// A kept output larger than this is not read: 100,000 rows of JSON are about 35 MB.
constexpr std::size_t kMaxBytes = 256u << 20;

// The next line of `text` from `at`, without its newline, and `at` past it; nullopt at the end.
std::optional<std::string_view> next_line(std::string_view text, std::size_t& at) {
  const auto end = text.find('\n', at);
  if (end == std::string_view::npos) return std::nullopt;
  const auto line = text.substr(at, end - at);
  at = end + 1;
  return line;
}

// The rest of `line` after `word` and a space, or nullopt when it does not start so.
std::optional<std::string_view> after(std::string_view line, std::string_view word) {
  if (!line.starts_with(word) || line.size() <= word.size() || line[word.size()] != ' ')
    return std::nullopt;
  return line.substr(word.size() + 1);
}

bool is_digest(std::string_view text) {
  return text.size() == 40 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::optional<std::size_t> count_of(std::optional<std::string_view> text) {
  std::size_t count = 0;
  if (!text || text->empty()) return std::nullopt;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), count);
  if (ec != std::errc() || end != text->data() + text->size()) return std::nullopt;
  return count;
}

}  // namespace

std::string write_cached_listing(std::string_view args, const CachedListing& listing) {
  std::string text(kHeader);
  text += "args " + std::string(args) + "\n";
  text += "digest " + listing.digest + "\n";
  text += "problems " + std::to_string(listing.problems.size()) + "\n";
  for (const auto& problem : listing.problems) text += nlohmann::json(problem).dump() + "\n";
  text += "output " + std::to_string(listing.output.size()) + "\n";
  return text + listing.output;
}

std::optional<CachedListing> parse_cached_listing(std::string_view text, std::string_view args) {
  if (!text.starts_with(kHeader)) return std::nullopt;
  std::size_t at = kHeader.size();
  const auto line = [&](std::string_view word) {
    const auto next = next_line(text, at);
    return next ? after(*next, word) : std::nullopt;
  };
  CachedListing listing;
  const auto written_for = line("args");
  const auto digest = line("digest");
  const auto count = count_of(line("problems"));
  if (written_for != args || !digest || !is_digest(*digest) || !count) return std::nullopt;
  listing.digest = *digest;
  for (std::size_t i = 0; i < *count; ++i) {
    const auto problem = next_line(text, at);
    if (!problem) return std::nullopt;
    const auto json = parse_bounded_json(*problem, {.max_bytes = problem->size(), .max_depth = 1});
    if (!json || !json->is_string()) return std::nullopt;
    listing.problems.push_back(json->get<std::string>());
  }
  const auto bytes = count_of(line("output"));
  if (!bytes || text.size() - at != *bytes) return std::nullopt;
  listing.output = text.substr(at);
  return listing;
}

// A regular file only, never through a link, and within kMaxBytes: the cache directory is ours,
// but a FIFO or a link to a device there must not hang a listing.
std::optional<CachedListing> read_cached_listing(const std::filesystem::path& path,
                                                 std::string_view args) {
  const Fd file(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!file || ::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<std::size_t>(st.st_size) > kMaxBytes)
    return std::nullopt;
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const auto n = ::read(file.get(), text.data() + got, text.size() - got);
    if (n <= 0) return std::nullopt;
    got += static_cast<std::size_t>(n);
  }
  return parse_cached_listing(text, args);
}

void keep_cached_listing(const std::filesystem::path& path, std::string_view args,
                         const CachedListing& listing) {
  try {
    if (std::filesystem::exists(path.parent_path()))
      checkpoint::write_file_atomically(path, write_cached_listing(args, listing),
                                        checkpoint::Durability::atomic);
  } catch (const std::exception&) {
    // The listing was printed; the next one reads every entry again.
  }
}

}  // namespace inflight::app
