// Our pack indexer (libcheckpoint/src/git/pack_indexer.hpp) against libgit2's,
// on any bytes a results-repo server may send. Differential: when ours indexes
// a pack, libgit2 indexes it too and writes the same .idx byte for byte; when
// libgit2 refuses a pack, ours has given up on it; and ours reads the pack the
// same whole or cut at any byte. Input: a cut byte, then the pack without its
// trailing checksum, which is added here (as libgit2's packfile_fuzzer does):
// else nearly every mutation would end at a wrong checksum, short of the
// comparison.
#include <git2.h>
#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "git/pack_indexer.hpp"

namespace {

using inflight::checkpoint::PackIndexer;

// libgit2's .idx of the pack, or nullopt when its indexer refuses it.
std::optional<std::string> libgit2_index(std::span<const unsigned char> pack) {
  static const int initialized = git_libgit2_init();
  (void)initialized;
  char dir[] = "/tmp/fuzz-pack-XXXXXX";
  if (::mkdtemp(dir) == nullptr) std::abort();
  git_indexer* indexer = nullptr;
  git_indexer_options options = GIT_INDEXER_OPTIONS_INIT;
  std::optional<std::string> index;
  if (git_indexer_new(&indexer, dir, 0, nullptr, &options) == 0) {
    git_indexer_progress stats{};
    if (git_indexer_append(indexer, pack.data(), pack.size(), &stats) == 0 &&
        git_indexer_commit(indexer, &stats) == 0) {
      std::ifstream file(std::string(dir) + "/pack-" + git_indexer_name(indexer) + ".idx",
                         std::ios::binary);
      index.emplace(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    }
    git_indexer_free(indexer);
  }
  std::filesystem::remove_all(dir);
  return index;
}

// Ours, the pack read in two pieces cut at `cut`: its .idx, or nullopt when it gave up.
std::optional<std::string> our_index(std::span<const unsigned char> pack, std::size_t cut) {
  PackIndexer indexer;
  indexer.read(pack.first(cut));
  indexer.read(pack.subspan(cut));
  if (indexer.state() != PackIndexer::State::indexed) return std::nullopt;
  const auto read_back = [pack](std::uint64_t at, std::span<unsigned char> out) {
    if (at + out.size() > pack.size()) throw std::runtime_error("past the pack");
    std::memcpy(out.data(), pack.data() + at, out.size());
  };
  if (indexer.resolve_deltas(read_back) != PackIndexer::State::indexed) return std::nullopt;
  return indexer.index_file();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::vector<unsigned char> bytes(data + 1, data + size);
  inflight::checkpoint::Sha1 sha;
  sha.update(bytes);
  const auto checksum = sha.finish();
  bytes.insert(bytes.end(), checksum.begin(), checksum.end());
  const std::span<const unsigned char> pack(bytes);
  const std::size_t cut = data[0] % (pack.size() + 1);
  const auto ours = our_index(pack, cut);
  if (ours != our_index(pack, pack.size())) std::abort();  // pieces change nothing
  if (!ours) return 0;  // given up: libgit2's verdict stands, whatever it is
  const auto theirs = libgit2_index(pack);
  if (!theirs || *theirs != *ours) std::abort();
  return 0;
}
