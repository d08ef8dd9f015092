// Temporary directories, files, the git program and raw libgit2 access for
// the checkpoint tests.
#pragma once

#include <git2.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "inflight/checkpoint/git_store.hpp"

namespace inflight::checkpoint::testing {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "inflight-ckpt-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline void write_file(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

inline void append_file(const fs::path& path, const std::string& content) {
  std::ofstream(path, std::ios::binary | std::ios::app) << content;
}

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs a shell command (tests only) and returns its stdout; fails the test on a non-zero exit.
inline std::string run(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string out;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  const int status = ::pclose(pipe);
  EXPECT_EQ(status, 0) << command;
  return out;
}

inline std::string git(const fs::path& repo, const std::string& args) {
  return run("git -C '" + repo.string() + "' " + args + " 2>/dev/null");
}

inline std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

// Owns a raw libgit2 repository handle for crafting objects.
class RawRepo {
 public:
  explicit RawRepo(const fs::path& path) {
    EXPECT_EQ(git_repository_open(&repo_, path.c_str()), 0);
    EXPECT_EQ(git_repository_odb(&odb_, repo_), 0);
  }
  ~RawRepo() {
    git_odb_free(odb_);
    git_repository_free(repo_);
  }
  RawRepo(const RawRepo&) = delete;
  RawRepo& operator=(const RawRepo&) = delete;

  git_oid write(const std::string& data, git_object_t type) {
    git_oid oid;
    EXPECT_EQ(git_odb_write(&oid, odb_, data.data(), data.size(), type), 0);
    return oid;
  }

  std::size_t object_count() {
    std::size_t count = 0;
    git_odb_foreach(
        odb_,
        [](const git_oid*, void* payload) {
          ++*static_cast<std::size_t*>(payload);
          return 0;
        },
        &count);
    return count;
  }

 private:
  git_repository* repo_ = nullptr;
  git_odb* odb_ = nullptr;
};

struct TreeEntrySpec {
  std::string mode;  // "100644", "40000", ...
  std::string name;
  git_oid oid;
};

// A tree object written byte for byte, bypassing libgit2's name checks.
inline git_oid write_raw_tree(RawRepo& repo, const std::vector<TreeEntrySpec>& entries) {
  std::string data;
  for (const auto& entry : entries) {
    data += entry.mode + " " + entry.name + '\0';
    data.append(reinterpret_cast<const char*>(entry.oid.id), GIT_OID_RAWSZ);
  }
  return repo.write(data, GIT_OBJECT_TREE);
}

inline std::string hex(const git_oid& oid) {
  char text[GIT_OID_HEXSZ + 1];
  git_oid_tostr(text, sizeof text, &oid);
  return text;
}

inline std::string write_raw_commit(RawRepo& repo, const git_oid& tree) {
  const std::string data = "tree " + hex(tree) +
                           "\nauthor t <t@t> 1700000000 +0000\ncommitter t <t@t> 1700000000 "
                           "+0000\n\ncrafted\n";
  return hex(repo.write(data, GIT_OBJECT_COMMIT));
}

// Every test holds the library for its own lifetime; libgit2 counts inits.
class CheckpointTest : public ::testing::Test {
 protected:
  GitLibrary library_;
  TempDir temp_;
  fs::path cache_path() const { return temp_.path() / "cache.git"; }
  fs::path run_dir() const { return temp_.path() / "run"; }
};

}  // namespace inflight::checkpoint::testing
