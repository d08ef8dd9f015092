// Our own indexing of a download's pack: the index libgit2 would write for
// what it takes, and a clean give-up on everything else a server may send.
#include "git/pack_indexer.hpp"

#include <git2.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>

#include "checkpoint/git/test_pack.hpp"
#include "inflight/checkpoint/git_store.hpp"
#include "temp_dir.hpp"

namespace inflight::checkpoint {
namespace {

using State = PackIndexer::State;
using Bytes = std::vector<unsigned char>;

// libgit2's .idx of `pack`, or nullopt when its indexer refuses the pack.
std::optional<std::string> libgit2_index_of(const Bytes& pack) {
  const TempDir dir;
  git_indexer* raw = nullptr;
  git_indexer_options options = GIT_INDEXER_OPTIONS_INIT;
  EXPECT_EQ(git_indexer_new(&raw, dir.path().c_str(), 0, nullptr, &options), 0);
  git_indexer_progress stats{};
  const bool indexed = git_indexer_append(raw, pack.data(), pack.size(), &stats) == 0 &&
                       git_indexer_commit(raw, &stats) == 0;
  const std::string name = indexed ? git_indexer_name(raw) : "";
  git_indexer_free(raw);
  if (!indexed) return std::nullopt;
  std::ifstream file(dir.path() / ("pack-" + name + ".idx"), std::ios::binary);
  return std::string{std::istreambuf_iterator<char>(file), {}};
}

// Reads `pack` in pieces of `piece` bytes, then resolves its deltas.
State index(PackIndexer& index, const Bytes& pack, std::size_t piece) {
  for (std::size_t at = 0; at < pack.size(); at += piece)
    index.read(std::span(pack).subspan(at, std::min(piece, pack.size() - at)));
  if (index.state() != State::indexed) return index.state();
  return index.resolve_deltas([&pack](std::uint64_t at, std::span<unsigned char> out) {
    ASSERT_LE(at + out.size(), pack.size());
    std::memcpy(out.data(), pack.data() + at, out.size());
  });
}

State index(const Bytes& pack) {
  PackIndexer i;
  return index(i, pack, pack.size());
}

// A commit, a tree, an empty blob, a 200 KB blob, and a chain of two deltas.
TestPack sample_pack() {
  TestPack pack;
  const std::string big(200'000, 'x');
  pack.whole(kBlobType, "");
  const auto base = pack.whole(kBlobType, "hello world");
  const auto first = pack.offset_delta(base, TestPack::delta(11, 11, 0, 6, "there"));
  pack.offset_delta(first, TestPack::delta(11, 8, 6, 5, "!!!"));
  pack.whole(kBlobType, big);
  pack.whole(2, std::string("100644 a\0", 9) + std::string(20, '\1'));
  pack.whole(1,
             "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor a <a> 0 +0000\n"
             "committer a <a> 0 +0000\n\nm\n");
  return pack;
}

TEST(PackIndexer, WritesTheIndexLibgit2WritesInAnyPieces) {
  const GitLibrary library;
  const Bytes pack = sample_pack().bytes();
  const auto expected = libgit2_index_of(pack);
  ASSERT_TRUE(expected && !expected->empty());
  for (const std::size_t piece : {std::size_t{1}, std::size_t{7}, std::size_t{4096}, pack.size()}) {
    PackIndexer ours;
    ASSERT_EQ(index(ours, pack, piece), State::indexed) << piece;
    EXPECT_EQ(ours.objects_read(), 7u);
    EXPECT_EQ(ours.index_file(), expected) << "pieces of " << piece;
  }
}

// libgit2 1.5's indexer refuses version 3 ("wrong pack version"), so ours leaves it to libgit2
// (found by the pack indexer's fuzz target; its input is in tests/fuzz/corpus/pack_indexer).
TEST(PackIndexer, LeavesVersionThreePacksToLibgit2WhichRefusesThem) {
  const GitLibrary library;
  const Bytes pack = sample_pack().bytes(3);
  PackIndexer ours;
  EXPECT_EQ(index(ours, pack, pack.size()), State::given_up);
  EXPECT_EQ(ours.why_given_up(), "not a pack of version 2");
  EXPECT_EQ(libgit2_index_of(pack), std::nullopt);
}

TEST(PackIndexer, WaitsForTheRestOfATruncatedPack) {
  Bytes pack = sample_pack().bytes();
  pack.pop_back();
  EXPECT_EQ(index(pack), State::reading);
}

TEST(PackIndexer, GivesUpOnWhatIsNotAPackOfItsOwn) {
  const std::string hello = TestPack::compressed("hello");
  struct Case {
    const char* what;
    Bytes pack;
  };
  std::vector<Case> cases;
  const auto add = [&cases](const char* what, const TestPack& pack, std::uint32_t version = 2) {
    cases.push_back({what, pack.bytes(version)});
  };
  add("version 4", sample_pack(), 4);
  add("no objects", TestPack{});
  {
    TestPack p;
    p.ref_delta(Sha1Digest{}, TestPack::delta(5, 5, 0, 5, ""));
    add("a delta against an object outside the pack", p);
  }
  {
    TestPack p;
    p.whole(kBlobType, "hello");
    p.offset_delta(13, TestPack::delta(5, 5, 0, 5, ""));
    add("a delta whose base is not an object's start", p);
  }
  for (const int type : {0, 5}) {
    TestPack p;
    p.object(type, 5, "", hello);
    add("an object of no type", p);
  }
  {
    TestPack p;
    p.object(kBlobType, 4, "", hello);
    add("a stream longer than its header says", p);
  }
  {
    TestPack p;
    p.object(kBlobType, 6, "", hello);
    p.whole(kBlobType, "next");
    add("a stream shorter than its header says", p);
  }
  {
    TestPack p;
    std::string broken = hello;
    broken[3] = static_cast<char>(broken[3] ^ 0xff);
    p.object(kBlobType, 5, "", broken);
    add("a stream that is not zlib's", p);
  }
  cases.push_back({"not a pack", Bytes(40, 'x')});
  cases.push_back({"a wrong trailer", sample_pack().bytes()});
  cases.back().pack.back() ^= 1;
  cases.push_back({"a byte past the trailer", sample_pack().bytes()});
  cases.back().pack.push_back(0);
  for (const auto& c : cases) {
    PackIndexer ours;
    EXPECT_EQ(index(ours, c.pack, 3), State::given_up) << c.what;
    EXPECT_EQ(ours.objects_read(), 0u) << c.what << ": what it read is dropped";
  }
}

TEST(PackIndexer, GivesUpOnADeltaThatDoesNotApply) {
  for (const auto& delta : {TestPack::delta(6, 5, 0, 5, ""), TestPack::delta(5, 5, 1, 5, ""),
                            TestPack::delta(5, 4, 0, 5, ""), TestPack::delta(5, 6, 0, 5, "")}) {
    TestPack pack;
    const auto base = pack.whole(kBlobType, "hello");
    pack.offset_delta(base, delta);
    EXPECT_EQ(index(pack.bytes()), State::given_up);
  }
}

// Each delta's base is kept once made: a chain of 200 reads each object of
// the pack once, not the whole chain again for each delta.
TEST(PackIndexer, AppliesALongChainReadingEachObjectOnce) {
  const GitLibrary library;
  TestPack pack;
  auto last = pack.whole(kBlobType, std::string(1000, 'a'));
  for (std::uint32_t size = 1000; size < 1200; ++size)
    last = pack.offset_delta(last, TestPack::delta(size, size + 1, 0, size, "x"));
  const Bytes bytes = pack.bytes();
  PackIndexer ours;
  for (std::size_t at = 0; at < bytes.size(); at += 4096)
    ours.read(std::span(bytes).subspan(at, std::min<std::size_t>(4096, bytes.size() - at)));
  std::size_t read_back = 0;
  ASSERT_EQ(ours.resolve_deltas([&](std::uint64_t at, std::span<unsigned char> out) {
    read_back += out.size();
    std::memcpy(out.data(), bytes.data() + at, out.size());
  }),
            State::indexed);
  EXPECT_LE(read_back, bytes.size());
  EXPECT_EQ(ours.index_file(), libgit2_index_of(bytes));
}

// A copy of length 0 copies 64 KiB, in git's delta format.
TEST(PackIndexer, ReadsACopyOfNoLengthAs64KiB) {
  const GitLibrary library;
  TestPack pack;
  const auto base = pack.whole(kBlobType, std::string(70'000, 'a'));
  pack.offset_delta(
      base, TestPack::delta(70'000, 0x10001, TestPack::copy(0, 0) + TestPack::inserted("b")));
  const Bytes bytes = pack.bytes();
  EXPECT_EQ(index(bytes), State::indexed);
  PackIndexer ours;
  ASSERT_EQ(index(ours, bytes, bytes.size()), State::indexed);
  EXPECT_EQ(ours.index_file(), libgit2_index_of(bytes));
}

// Results of 16 MiB are applied, and not a byte more: given up as the
// delta streams, before anything is made.
TEST(PackIndexer, GivesUpOnADeltaPast16MiB) {
  for (const std::size_t past : {0, 1}) {
    TestPack pack;
    const auto base = pack.whole(kBlobType, std::string(1 << 16, 'a'));
    std::string copies;
    for (int i = 0; i < 256; ++i) copies += TestPack::copy(0, 0);
    pack.offset_delta(base, TestPack::delta(1 << 16, (16 << 20) + past,
                                            copies + TestPack::inserted(std::string(past, 'b'))));
    const Bytes bytes = pack.bytes();
    PackIndexer ours;
    ours.read(bytes);
    EXPECT_EQ(ours.state(), past == 0 ? State::indexed : State::given_up);
    if (past == 0) {
      EXPECT_EQ(index(bytes), State::indexed);
    }
  }
}

// Deltas that take turns at more 16 MiB bases than the 64 MiB kept would
// inflate each base again for each delta: past four times what making
// each object once costs, the pack is libgit2's.
TEST(PackIndexer, GivesUpOnDeltasThatWouldMakeTheirBasesAgainAndAgain) {
  for (const int bases : {4, 5}) {
    TestPack pack;
    std::vector<std::uint64_t> offsets;
    for (int b = 0; b < bases; ++b)
      offsets.push_back(pack.whole(kBlobType, std::string(16 << 20, static_cast<char>('a' + b))));
    for (int d = 0; d < 30; ++d) {
      const std::string suffix = std::to_string(d);
      pack.offset_delta(offsets[d % bases],
                        TestPack::delta(16 << 20, 10 + suffix.size(),
                                        TestPack::copy(0, 10) + TestPack::inserted(suffix)));
    }
    EXPECT_EQ(index(pack.bytes()), bases == 4 ? State::indexed : State::given_up) << bases;
  }
}

}  // namespace
}  // namespace inflight::checkpoint
