// The cache's pack writer: a pack it indexed itself is kept as git names
// it, and one it gave up on is libgit2's to index or to refuse.
#include "git/pack_writer.hpp"

#include <git2.h>
#include <git2/sys/odb_backend.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <memory>

#include "checkpoint/git/test_pack.hpp"
#include "git/cache_repo_impl.hpp"
#include "git/git_handle.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"
#include "temp_dir.hpp"

namespace inflight::checkpoint {
namespace {

namespace fs = std::filesystem;

struct WritepackFree {
  void operator()(git_odb_writepack* w) const { w->free(w); }
};

class PackWriterTest : public ::testing::Test {
 protected:
  // What the cache's object database makes of `pack`: the commit's result.
  int write(const std::vector<unsigned char>& pack) {
    const OdbHandle odb = open_odb(cache.impl().repo.get());
    git_odb_writepack* raw = nullptr;
    EXPECT_EQ(git_odb_write_pack(&raw, odb.get(), nullptr, nullptr), 0);
    const std::unique_ptr<git_odb_writepack, WritepackFree> writepack(raw);
    git_indexer_progress stats{};
    const std::size_t half = pack.size() / 2;
    if (const int rc = writepack->append(raw, pack.data(), half, &stats); rc < 0) return rc;
    if (const int rc = writepack->append(raw, pack.data() + half, pack.size() - half, &stats);
        rc < 0)
      return rc;
    for (const auto& file : pack_dir_files())
      if (file.filename().string().starts_with(kOurFile)) our_file = inode_of(file);
    return writepack->commit(raw, &stats);
  }

  std::string read(const std::string& content) {
    git_oid id;
    EXPECT_EQ(git_odb_hash(&id, content.data(), content.size(), GIT_OBJECT_BLOB), 0);
    const OdbHandle odb = open_odb(cache.impl().repo.get());
    git_odb_object* raw = nullptr;
    if (git_odb_read(&raw, odb.get(), &id) != 0) return "(missing)";
    const OdbObjectHandle object(raw);
    return {static_cast<const char*>(git_odb_object_data(raw)), git_odb_object_size(raw)};
  }

  std::vector<fs::path> pack_dir_files() const {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir.path() / "cache.git" / "objects" / "pack"))
      files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    return files;
  }

  static ino_t inode_of(const fs::path& file) {
    struct stat st {};
    EXPECT_EQ(::stat(file.c_str(), &st), 0) << file;
    return st.st_ino;
  }

  // Our file of the pack in objects/pack when its last byte came, if it
  // was not handed to libgit2 by then: kept, it is the .pack itself.
  ino_t our_file = 0;
  static constexpr std::string_view kOurFile = "tmp_pack_inflight_";
  const GitLibrary library;
  const TempDir dir;
  CacheRepo cache{dir.path() / "cache.git"};
};

TEST_F(PackWriterTest, KeepsAPackItIndexedUnderGitsNameReadOnly) {
  TestPack pack;
  const auto base = pack.whole(kBlobType, "hello world");
  pack.offset_delta(base, TestPack::delta(11, 11, 0, 6, "there"));
  const auto bytes = pack.bytes();
  ASSERT_EQ(write(bytes), 0);
  EXPECT_EQ(read("hello there"), "hello there");
  EXPECT_EQ(read("hello world"), "hello world");
  Sha1 sha;
  sha.update(std::span(bytes).first(bytes.size() - 20));
  git_oid checksum;
  const auto digest = sha.finish();
  std::copy(digest.begin(), digest.end(), checksum.id);
  const fs::path name = dir.path() / "cache.git/objects/pack" / ("pack-" + oid_hex(checksum));
  ASSERT_EQ(pack_dir_files(), (std::vector{fs::path(name).replace_extension(".idx"),
                                           fs::path(name).replace_extension(".pack")}));
  for (const auto& file : pack_dir_files()) {
    struct stat st {};
    ASSERT_EQ(::stat(file.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0444u) << file;
  }
}

// A thin pack names its delta's base by id, outside the pack: libgit2
// indexes it from its first byte and completes it with the base.
TEST_F(PackWriterTest, HandsAThinPackToLibgit2) {
  const git_oid base = write_object(cache, "hello", 5, GIT_OBJECT_BLOB);
  Sha1Digest base_id{};
  std::copy(base.id, base.id + GIT_OID_RAWSZ, base_id.begin());
  TestPack pack;
  pack.ref_delta(base_id, TestPack::delta(5, 8, 0, 5, "!!!"));
  ASSERT_EQ(write(pack.bytes()), 0) << git_error_last()->message;
  EXPECT_EQ(our_file, 0u);
  EXPECT_EQ(read("hello!!!"), "hello!!!");
  EXPECT_EQ(pack_dir_files().size(), 2u) << "a .pack and an .idx, no file of ours";
  // Said once, and taken: the next look starts empty.
  EXPECT_EQ(cache.take_pack_handovers(),
            std::vector<std::string>{"a thin pack (a delta against an object named by id)"});
  EXPECT_EQ(cache.take_pack_handovers(), std::vector<std::string>{});
}

// A pack ours indexes leaves no handover; each it gives up on says why.
TEST_F(PackWriterTest, SaysWhyEachPackWentToLibgit2) {
  TestPack good;
  good.whole(kBlobType, "hello world");
  ASSERT_EQ(write(good.bytes()), 0);
  EXPECT_EQ(cache.take_pack_handovers(), std::vector<std::string>{});
  TestPack bad_checksum;
  bad_checksum.whole(kBlobType, "hello there");
  auto bytes = bad_checksum.bytes();
  bytes.back() ^= 1;
  EXPECT_LT(write(bytes), 0);  // libgit2 refuses it too
  EXPECT_EQ(cache.take_pack_handovers(),
            std::vector<std::string>{"the pack's checksum does not match"});
}

TEST_F(PackWriterTest, ATruncatedPackFailsAsInLibgit2AndLeavesNoFile) {
  TestPack pack;
  pack.whole(kBlobType, "hello world");
  auto bytes = pack.bytes();
  bytes.pop_back();
  EXPECT_LT(write(bytes), 0);
  ASSERT_NE(git_error_last(), nullptr);
  EXPECT_NE(std::string(git_error_last()->message), "");
  EXPECT_EQ(read("hello world"), "(missing)");
  EXPECT_EQ(pack_dir_files(), std::vector<fs::path>{});
}

}  // namespace
}  // namespace inflight::checkpoint
