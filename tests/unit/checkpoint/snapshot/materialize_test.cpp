#include "snapshot/materialize.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <utility>

#include "checkpoint/checkpoint_test_support.hpp"
#include "git/cache_repo_impl.hpp"
#include "snapshot/chunked_file.hpp"

namespace inflight::checkpoint::testing {
namespace {

class MaterializeTest : public CheckpointTest {
 protected:
  void SetUp() override {
    repo_.emplace(cache_path());
    raw_.emplace(cache_path());
    fs::create_directories(outside());
  }
  fs::path outside() const { return temp_.path() / "outside"; }
  git_oid blob(const std::string& content) { return raw_->write(content, GIT_OBJECT_BLOB); }
  git_oid tree(const std::vector<TreeEntrySpec>& entries) { return write_raw_tree(*raw_, entries); }
  std::string commit(const git_oid& root) { return write_raw_commit(*raw_, root); }

  // Asserts a refusal that wrote nothing at all: no run dir, nothing outside.
  void expect_refused(const std::string& commit_oid, std::uint64_t max_bytes, const char* rule) {
    try {
      materialize(*repo_, commit_oid, run_dir(), {.max_bytes = max_bytes, .max_files = 1000});
      ADD_FAILURE() << "expected hostile_tree for " << rule;
    } catch (const GitError& error) {
      EXPECT_EQ(error.kind(), Failure::hostile_tree) << error.what();
      EXPECT_NE(std::string(error.what()).find(rule), std::string::npos) << error.what();
    }
    EXPECT_FALSE(fs::exists(run_dir()));
    EXPECT_TRUE(fs::is_empty(outside()));
  }

  std::optional<CacheRepo> repo_;
  std::optional<RawRepo> raw_;
};

TEST_F(MaterializeTest, WritesFilesDirectoriesAndModes) {
  const git_oid sub = tree({{"100644", "b.txt", blob("bee")}});
  const std::string c = commit(tree({{"100644", "a.txt", blob("ay")},
                                     {"100755", "run.sh", blob("#!/bin/sh\n")},
                                     {"40000", "sub", sub}}));
  materialize(*repo_, c, run_dir(), {.max_bytes = 1 << 20, .max_files = 1000});
  EXPECT_EQ(read_file(run_dir() / "a.txt"), "ay");
  EXPECT_EQ(read_file(run_dir() / "sub" / "b.txt"), "bee");
  const auto perms = fs::status(run_dir() / "run.sh").permissions();
  EXPECT_NE(perms & fs::perms::owner_exec, fs::perms::none);
  EXPECT_EQ(fs::status(run_dir() / "a.txt").permissions() & fs::perms::owner_exec, fs::perms::none);
}

TEST_F(MaterializeTest, OverwritesExistingFilesAndNeverFollowsPlantedSymlinks) {
  write_file(outside() / "victim.txt", "untouched");
  fs::create_directories(run_dir());
  write_file(run_dir() / "a.txt", "old");
  fs::create_symlink(outside() / "victim.txt", run_dir() / "victim.txt");
  fs::create_directory_symlink(outside(), run_dir() / "sub");
  const std::string c = commit(tree({{"100644", "a.txt", blob("new")},
                                     {"40000", "sub", tree({{"100644", "planted.txt", blob("p")}})},
                                     {"100644", "victim.txt", blob("replaced")}}));
  materialize(*repo_, c, run_dir(), {.max_bytes = 1 << 20, .max_files = 1000});
  EXPECT_EQ(read_file(run_dir() / "a.txt"), "new");
  EXPECT_EQ(read_file(run_dir() / "victim.txt"), "replaced");
  EXPECT_FALSE(fs::is_symlink(run_dir() / "victim.txt"));
  EXPECT_FALSE(fs::is_symlink(run_dir() / "sub"));
  EXPECT_EQ(read_file(run_dir() / "sub" / "planted.txt"), "p");
  EXPECT_EQ(read_file(outside() / "victim.txt"), "untouched");
  EXPECT_FALSE(fs::exists(outside() / "planted.txt"));
}

TEST_F(MaterializeTest, RefusesANameThatIsNotUtf8) {
  expect_refused(commit(tree({{"100644", "ok.txt", blob("x")}, {"100644", "bad\xff", blob("x")}})),
                 1 << 20, "name is not UTF-8");
}

// No file system here holds the name: refused before anything is written
// (or claimed), not failed half-way through the write.
TEST_F(MaterializeTest, RefusesANameLongerThanAFileSystemHolds) {
  expect_refused(commit(tree({{"100644", std::string(256, 'n'), blob("x")}})), 1 << 20,
                 "name longer than 255 bytes");
}

// A chunk tree's entry is longer than its file's name, which alone counts.
TEST_F(MaterializeTest, AChunkedFileMayHaveTheLongestName) {
  const std::string name(kMaxNameBytes, 'n');
  const git_oid group =
      tree({{"100644", "000000", blob("long ")}, {"100644", "000001", blob("name")}});
  materialize(*repo_,
              commit(tree({{"40000", name + std::string(kChunkSuffix),
                            tree({{"40000", "000000", group}})}})),
              run_dir(), {.max_bytes = 1 << 20, .max_files = 1000});
  EXPECT_EQ(read_file(run_dir() / name), "long name");
}

TEST_F(MaterializeTest, RefusesMoreFilesThanTheLimitCountingDirectories) {
  const git_oid x = blob("x");
  const std::string c =
      commit(tree({{"100644", "a", x}, {"40000", "d", tree({{"100644", "b", x}})}}));
  try {
    materialize(*repo_, c, run_dir(), {.max_bytes = 1 << 20, .max_files = 2});
    ADD_FAILURE() << "expected hostile_tree";
  } catch (const GitError& error) {
    EXPECT_NE(std::string(error.what()).find("more than 2 files"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(run_dir()));
  materialize(*repo_, c, run_dir(), {.max_bytes = 1 << 20, .max_files = 3});
  EXPECT_EQ(read_file(run_dir() / "d" / "b"), "x");
}

// Restored files are the creating process's, as any file it writes: its umask applies.
TEST_F(MaterializeTest, RestoredFilesTakeTheUmask) {
  const std::string c =
      commit(tree({{"100644", "a.txt", blob("a")}, {"100755", "run.sh", blob("#!/bin/sh\n")}}));
  const mode_t old = ::umask(027);
  materialize(*repo_, c, run_dir(), {});
  ::umask(old);
  EXPECT_EQ(fs::status(run_dir() / "a.txt").permissions(), fs::perms(0640));
  EXPECT_EQ(fs::status(run_dir() / "run.sh").permissions(), fs::perms(0750));
}

TEST_F(MaterializeTest, RefusesDotDot) {
  expect_refused(commit(tree({{"100644", "..", blob("x")}})), 1 << 20, "'..'");
}

TEST_F(MaterializeTest, RefusesDotDotDeepInside) {
  const git_oid evil = tree({{"100644", "a", blob("x")}, {"40000", "..", tree({})}});
  expect_refused(commit(tree({{"100644", "fine.txt", blob("f")}, {"40000", "sub", evil}})), 1 << 20,
                 "sub/..");
}

TEST_F(MaterializeTest, RefusesDotGitInAnyCase) {
  const git_oid hooks = tree({{"100755", "post-checkout", blob("#!/bin/sh\n")}});
  expect_refused(commit(tree({{"40000", ".git", hooks}})), 1 << 20, ".git");
  expect_refused(commit(tree({{"40000", ".GiT", hooks}})), 1 << 20, ".git");
}

TEST_F(MaterializeTest, RefusesSymlinkEntries) {
  expect_refused(commit(tree({{"100644", "a.txt", blob("a")}, {"120000", "link", blob("/etc")}})),
                 1 << 20, "symbolic link");
}

TEST_F(MaterializeTest, RefusesGitlinks) {
  git_oid somewhere;
  git_oid_fromstr(&somewhere, std::string(40, '1').c_str());
  expect_refused(commit(tree({{"160000", "module", somewhere}})), 1 << 20, "gitlink");
}

TEST_F(MaterializeTest, RefusesNamesWithSlash) {
  expect_refused(commit(tree({{"100644", "../../outside/escape.txt", blob("x")}})), 1 << 20, "'/'");
}

TEST_F(MaterializeTest, RefusesTreesOverTheSizeLimit) {
  expect_refused(commit(tree({{"100644", "a", blob(std::string(600, 'a'))},
                              {"100644", "b", blob(std::string(600, 'b'))}})),
                 1000, "larger than the limit");
}

TEST_F(MaterializeTest, RefusesMalformedChunkTrees) {
  const git_oid chunks = tree({{"100644", "000000", blob("x")}, {"100644", "evil", blob("y")}});
  expect_refused(commit(tree({{"40000", "big.inflight-chunks", chunks}})), 1 << 20, "chunk");
}

TEST_F(MaterializeTest, RefusesChunkTreeThatWouldWriteDotGit) {
  const git_oid chunks = tree({{"100644", "000000", blob("x")}});
  expect_refused(commit(tree({{"40000", ".git.inflight-chunks", chunks}})), 1 << 20, ".git");
}

// The layout this release writes: group trees of chunk blobs.
TEST_F(MaterializeTest, ReassemblesChunkedFiles) {
  const git_oid group =
      tree({{"100644", "000000", blob("hello ")}, {"100644", "000001", blob("world")}});
  const std::string c =
      commit(tree({{"40000", "index.jsonl.inflight-chunks", tree({{"40000", "000000", group}})}}));
  materialize(*repo_, c, run_dir(), {.max_bytes = 1 << 20, .max_files = 1000});
  EXPECT_EQ(read_file(run_dir() / "index.jsonl"), "hello world");
  EXPECT_EQ(read_file_at(*repo_, c, "index.jsonl", 1 << 30), "hello world");
  EXPECT_EQ(read_file_at(*repo_, c, "missing.json", 1 << 30), std::nullopt);
}

// Earlier releases put the chunk blobs straight into the chunk tree.
TEST_F(MaterializeTest, ReassemblesChunkedFilesOfTheFlatLayout) {
  const git_oid chunks =
      tree({{"100644", "000000", blob("hello ")}, {"100644", "000001", blob("world")}});
  const std::string c = commit(tree({{"40000", "index.jsonl.inflight-chunks", chunks}}));
  materialize(*repo_, c, run_dir(), {.max_bytes = 1 << 20, .max_files = 1000});
  EXPECT_EQ(read_file(run_dir() / "index.jsonl"), "hello world");
  EXPECT_EQ(read_file_at(*repo_, c, "index.jsonl", 1 << 30), "hello world");
}

// A file of two groups or more is written by two threads, the second half
// at the offset the first half's chunk sizes (which vary) add up to; its
// lines are counted as written, a line split across chunks once.
TEST_F(MaterializeTest, ABigChunkedFileIsWrittenInOrderByTwoThreads) {
  std::string whole;
  std::vector<git_oid> groups;
  std::vector<TreeEntrySpec> group;
  for (std::size_t i = 0; i < 2 * kChunksPerGroup + 3; ++i) {
    const std::string chunk =
        "chunk " + std::to_string(i) + std::string(i % 7, '.') + (i % 3 == 0 ? "" : "\n");
    whole += chunk;
    group.push_back({"100644", chunk_name(group.size()), blob(chunk)});
    if (group.size() == kChunksPerGroup) groups.push_back(tree(std::exchange(group, {})));
  }
  groups.push_back(tree(group));
  std::vector<TreeEntrySpec> top;
  for (std::size_t g = 0; g < groups.size(); ++g)
    top.push_back({"40000", chunk_name(g), groups[g]});
  const std::string c = commit(tree({{"40000", "index.jsonl.inflight-chunks", tree(top)}}));
  const ValidatedCommit validated(raw_repo(*repo_), c, {.max_bytes = 1 << 20, .max_files = 1000});
  const auto lines = materialize_tree(raw_repo(*repo_), validated, run_dir(), "index.jsonl");
  EXPECT_EQ(read_file(run_dir() / "index.jsonl"), whole);
  EXPECT_EQ(lines, static_cast<std::uint64_t>(std::count(whole.begin(), whole.end(), '\n')));
}

TEST_F(MaterializeTest, CountsTheLinesOfTheFileAskedForAsItIsWritten) {
  const git_oid out = tree({{"100644", "p.jsonl", blob("a\nb\nc")}});
  const std::string c = commit(tree({{"40000", "out", out}, {"100644", "x", blob("\n\n\n")}}));
  const ValidatedCommit v(raw_repo(*repo_), c, {.max_bytes = 1 << 20, .max_files = 1000});
  EXPECT_EQ(materialize_tree(raw_repo(*repo_), v, run_dir(), "out/p.jsonl"), 2u);
  EXPECT_EQ(materialize_tree(raw_repo(*repo_), v, run_dir(), "./out//p.jsonl"), 2u);
  EXPECT_EQ(materialize_tree(raw_repo(*repo_), v, run_dir(), "missing.jsonl"), 0u);
  EXPECT_EQ(materialize_tree(raw_repo(*repo_), v, run_dir(), ""), 0u);
}

// A tree over the limits is refused when its commit is validated, before any writer sees it:
// the writers take only validated commits, and validate nothing again.
TEST_F(MaterializeTest, ATreeIsValidatedOnceBeforeAnyWrite) {
  const std::string c = commit(tree({{"100644", "a", blob("1")}, {"100644", "b", blob("2")}}));
  EXPECT_THROW(ValidatedCommit(raw_repo(*repo_), c, {.max_bytes = 1 << 20, .max_files = 1}),
               GitError);
  EXPECT_FALSE(fs::exists(run_dir() / "a"));
}

// Chunk i must sit at i / 256 so that no two trees read as the same file.
TEST_F(MaterializeTest, RefusesAShortChunkGroupBeforeTheLast) {
  const git_oid one = tree({{"100644", "000000", blob("x")}});
  const git_oid chunks = tree({{"40000", "000000", one}, {"40000", "000001", one}});
  expect_refused(commit(tree({{"40000", "big.inflight-chunks", chunks}})), 1 << 20,
                 "big.inflight-chunks/000000': chunk group of 1 chunks");
}

TEST_F(MaterializeTest, RefusesChunkGroupsMixedWithChunks) {
  std::vector<TreeEntrySpec> full;
  for (std::size_t i = 0; i < kChunksPerGroup; ++i)
    full.push_back({"100644", chunk_name(i), blob("x")});
  const git_oid grouped = tree({{"40000", "000000", tree(full)}, {"100644", "000001", blob("y")}});
  expect_refused(commit(tree({{"40000", "big.inflight-chunks", grouped}})), 1 << 20,
                 "big.inflight-chunks/000001': not chunk group 000001");
  const git_oid flat = tree({{"100644", "000000", blob("y")}, {"40000", "000001", tree(full)}});
  expect_refused(commit(tree({{"40000", "big.inflight-chunks", flat}})), 1 << 20,
                 "big.inflight-chunks/000001': not chunk blob 000001");
}

TEST_F(MaterializeTest, RefusesAChunkGroupThatIsABlob) {
  const git_oid chunks = tree({{"40000", "000000", blob("not a tree")}});
  expect_refused(commit(tree({{"40000", "big.inflight-chunks", chunks}})), 1 << 20,
                 "big.inflight-chunks/000000");
}

// Group trees may all be one shared object: their count is bounded, not
// only the bytes, and an empty chunk (work without bytes) is refused.
TEST_F(MaterializeTest, RefusesMoreChunksThanTheLimitAndEmptyChunks) {
  std::vector<TreeEntrySpec> full;
  for (std::size_t i = 0; i < kChunksPerGroup; ++i)
    full.push_back({"100644", chunk_name(i), blob("x")});
  const git_oid group = tree(full);
  std::vector<TreeEntrySpec> groups;
  for (std::size_t g = 0; g <= kMaxChunks / kChunksPerGroup + 1; ++g)
    groups.push_back({"40000", chunk_name(g), group});
  expect_refused(commit(tree({{"40000", "big.inflight-chunks", tree(groups)}})), 1ull << 40,
                 "more than 1000000 chunks");
  const git_oid empty = tree({{"100644", "000000", blob("x")}, {"100644", "000001", blob("")}});
  expect_refused(
      commit(tree({{"40000", "big.inflight-chunks", tree({{"40000", "000000", empty}})}})), 1 << 20,
      "empty chunk");
}

// A branch's file is read before its tree is validated (run-params.json):
// the read stops at its limit instead of joining whatever the chunks hold.
TEST_F(MaterializeTest, ReadingOneFileStopsAtItsLimit) {
  const git_oid group =
      tree({{"100644", "000000", blob("hello ")}, {"100644", "000001", blob("world")}});
  const std::string c = commit(
      tree({{"100644", "console.log", blob("0123456789")},
            {"40000", "run-params.json.inflight-chunks", tree({{"40000", "000000", group}})}}));
  for (const char* path : {"run-params.json", "console.log"}) {
    try {
      read_file_at(*repo_, c, path, 8);
      ADD_FAILURE() << path << " read past its limit";
    } catch (const GitError& error) {
      EXPECT_EQ(error.kind(), Failure::over_limit) << error.what();
    }
  }
  EXPECT_EQ(read_file_at(*repo_, c, "run-params.json", 11), "hello world");
}

TEST_F(MaterializeTest, RefusesAMisnamedChunkInAGroup) {
  const git_oid group = tree({{"100644", "000000", blob("x")}, {"100644", "evil", blob("y")}});
  const git_oid chunks = tree({{"40000", "000000", group}});
  expect_refused(commit(tree({{"40000", "big.inflight-chunks", chunks}})), 1 << 20,
                 "big.inflight-chunks/000000/evil': not chunk blob 000001");
}

}  // namespace
}  // namespace inflight::checkpoint::testing
