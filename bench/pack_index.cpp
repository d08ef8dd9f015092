// Times the agent's own pack indexing (libcheckpoint/src/git/pack_indexer.*)
// on a pack file: read in pieces of 64 KiB from memory as a download hands
// them over, deltas applied, the .idx made. Prints the milliseconds of each
// of argv[2] rounds (default 5) and writes the .idx to argv[3] when given,
// so that bench/pack_index.py can compare it with git's and time `git
// index-pack` on the same file.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "git/pack_indexer.hpp"

using inflight::checkpoint::PackIndexer;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: pack_index_bench PACK [ROUNDS [IDX_OUT]]\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  const std::vector<unsigned char> pack((std::istreambuf_iterator<char>(in)), {});
  const int rounds = argc > 2 ? std::stoi(argv[2]) : 5;
  constexpr std::size_t kPiece = 64 << 10;
  for (int round = 0; round < rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    PackIndexer index;
    for (std::size_t at = 0; at < pack.size(); at += kPiece)
      index.read(std::span(pack).subspan(at, std::min(kPiece, pack.size() - at)));
    index.resolve_deltas([&pack](std::uint64_t at, std::span<unsigned char> out) {
      std::memcpy(out.data(), pack.data() + at, out.size());
    });
    const auto file =
        index.state() == PackIndexer::State::indexed ? index.index_file() : std::nullopt;
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!file) {
      std::fprintf(stderr, "pack_index_bench: the pack was given up\n");
      return 1;
    }
    std::printf("%.1f\n", ms);
    if (argc > 3 && round == 0) std::ofstream(argv[3], std::ios::binary) << *file;
  }
}
