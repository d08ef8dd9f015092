// The last output of `inflight runs list`, kept beside the cache repo (docs/results.md "Every
// run of the fleet: `inflight runs`"): the next listing of a results repo whose refs did not
// change prints it again instead of reading every entry anew. What the rows follow from is the
// agent's digest of the listing (checkpoint::RunListing::digest); what the output looks like,
// the release and the flags that render it.
//
// Format (written and read here only), one file:
//   inflight runs list cache 1
//   args <the release> <json|table> <state or -> <the results repo, without password>
//   digest <40 hex>
//   problems <N>
//   N lines, each a JSON string: the problems the listing warned about
//   output <bytes>
//   the output, exactly that many bytes to the end
// A file that is not this (one cut short, say), or was written for other args, is no cache.
// The version after the header is raised whenever the output is rendered otherwise.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inflight::app {

struct CachedListing {
  std::string digest;
  std::vector<std::string> problems;
  std::string output;
};

std::string write_cached_listing(std::string_view args, const CachedListing& listing);
std::optional<CachedListing> parse_cached_listing(std::string_view text, std::string_view args);

// The file's name, in the cache repo's directory. Read failures are no cache, and a write that
// fails is left (the output was printed).
inline constexpr std::string_view kCachedListingFile = "inflight-runs-list";
std::optional<CachedListing> read_cached_listing(const std::filesystem::path& path,
                                                 std::string_view args);
void keep_cached_listing(const std::filesystem::path& path, std::string_view args,
                         const CachedListing& listing);

}  // namespace inflight::app
