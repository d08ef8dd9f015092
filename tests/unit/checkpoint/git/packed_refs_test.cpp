// The cache's packed-refs: git's format, other refs kept, loose refs of
// earlier builds folded in.
#include "git/packed_refs.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <stdexcept>

#include "git/cache_repo_impl.hpp"
#include "git/git_handle.hpp"
#include "git/oid_text.hpp"
#include "temp_dir.hpp"

namespace inflight::checkpoint {
namespace {

namespace fs = std::filesystem;

const std::string kA = "1111111111111111111111111111111111111111";
const std::string kB = "2222222222222222222222222222222222222222";

TEST(PackedRefsFormat, ReadsWhatGitWrites) {
  const std::string text = "# pack-refs with: peeled fully-peeled sorted \n" + kA +
                           " refs/heads/main\n" + kA + " refs/tags/v1\n^" + kB + "\n";
  const auto refs = parse_packed_refs(text);
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_EQ(refs.at("refs/tags/v1").peeled, kB);
  EXPECT_EQ(write_packed_refs(refs), text);
}

TEST(PackedRefsFormat, NamesTheLineThatIsNotTheFormat) {
  for (const std::string& text : {"^" + kA + "\n", kA + "refs/heads/x\n", kA + " heads/x\n",
                                  kA.substr(1) + " refs/heads/x\n"}) {
    try {
      parse_packed_refs(text);
      ADD_FAILURE() << text;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("line 1"), std::string::npos) << e.what();
    }
  }
}

// libgit2 reads what pack_refs wrote; refs of others stay; a loose ref an
// earlier build left under the prefix is folded in and its file goes.
TEST(PackRefs, LibgitReadsThemAndLooseOnesAreFoldedIn) {
  const GitLibrary library;
  const TempDir dir;
  const auto repo_path = dir.path() / "cache.git";
  const auto repo = open_or_init_bare(repo_path);
  std::ofstream(repo_path / "packed-refs") << kB << " refs/heads/other\n";
  fs::create_directories(repo_path / "refs/inflight-local/inflight/p");
  std::ofstream(repo_path / "refs/inflight-local/inflight/p/old") << kB << "\n";
  pack_refs(repo_path, {{"refs/inflight-local/inflight/p/r1", parse_oid(kA)}},
            "refs/inflight-local/");
  EXPECT_FALSE(fs::exists(repo_path / "refs/inflight-local"));
  for (const auto& [ref, want] : {std::pair{"refs/inflight-local/inflight/p/r1", kA},
                                  {"refs/inflight-local/inflight/p/old", kB},
                                  {"refs/heads/other", kB}}) {
    git_oid oid;
    ASSERT_EQ(git_reference_name_to_id(&oid, repo.get(), ref), 0) << ref;
    EXPECT_EQ(oid_hex(oid), want) << ref;
  }
  // A zero id removes its ref, and only it.
  pack_refs(repo_path, {{"refs/inflight-local/inflight/p/old", git_oid{}}}, "refs/inflight-local/");
  git_oid oid;
  EXPECT_EQ(git_reference_name_to_id(&oid, repo.get(), "refs/inflight-local/inflight/p/old"),
            GIT_ENOTFOUND);
  git_error_clear();
  EXPECT_EQ(git_reference_name_to_id(&oid, repo.get(), "refs/inflight-local/inflight/p/r1"), 0);
  EXPECT_EQ(git_reference_name_to_id(&oid, repo.get(), "refs/heads/other"), 0);
}

}  // namespace
}  // namespace inflight::checkpoint
