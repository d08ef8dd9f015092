// The helpers are found in both layouts `inflight` ships in (build tree and
// installed prefix), and a missing agent is an exit-2 error that says where
// it looked and what to do.
#include "inflight/supervisor/process/sibling_binaries.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "inflight/supervisor/config/settings.hpp"
#include "temp_dir.hpp"

namespace inflight {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

void make_executable(const fs::path& path, fs::perms perms = fs::perms::owner_all) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << "#!/bin/sh\n";
  fs::permissions(path, perms);
}

TEST(SiblingBinaries, BuildTreeHelperIsNextToInflight) {
  TempDir dir;
  make_executable(dir.path() / "build/bin/inflight-checkpoint-agent");
  EXPECT_EQ(checkpoint_agent_binary(dir.path() / "build/bin/inflight"),
            dir.path() / "build/bin/inflight-checkpoint-agent");
}

TEST(SiblingBinaries, InstalledHelpersAreInLibexec) {
  TempDir dir;
  make_executable(dir.path() / "libexec/inflight/inflight-checkpoint-agent");
  make_executable(dir.path() / "libexec/inflight/inflight-demo-eval");
  const auto self = dir.path() / "bin/inflight";
  EXPECT_EQ(checkpoint_agent_binary(self),
            dir.path() / "libexec/inflight/inflight-checkpoint-agent");
  EXPECT_EQ(find_sibling_binary(kDemoChildName, self),
            dir.path() / "libexec/inflight/inflight-demo-eval");
}

TEST(SiblingBinaries, NextToInflightWinsOverLibexec) {
  TempDir dir;
  make_executable(dir.path() / "bin/inflight-demo-eval");
  make_executable(dir.path() / "libexec/inflight/inflight-demo-eval");
  EXPECT_EQ(find_sibling_binary(kDemoChildName, dir.path() / "bin/inflight"),
            dir.path() / "bin/inflight-demo-eval");
}

TEST(SiblingBinaries, AFileThatCannotRunIsNotTheHelper) {
  TempDir dir;
  make_executable(dir.path() / "bin/inflight-demo-eval", fs::perms::owner_read);
  EXPECT_EQ(find_sibling_binary(kDemoChildName, dir.path() / "bin/inflight"), std::nullopt);
}

TEST(SiblingBinaries, MissingAgentNamesBothPlacesAndTheFix) {
  TempDir dir;
  try {
    checkpoint_agent_binary(dir.path() / "bin/inflight");
    FAIL() << "a missing agent was accepted";
  } catch (const UsageError& e) {
    EXPECT_THAT(
        e.what(),
        AllOf(HasSubstr((dir.path() / "bin/inflight-checkpoint-agent").string()),
              HasSubstr((dir.path() / "libexec/inflight/inflight-checkpoint-agent").string()),
              HasSubstr("cmake --build build"), HasSubstr("cmake --install")));
  }
}

}  // namespace
}  // namespace inflight
