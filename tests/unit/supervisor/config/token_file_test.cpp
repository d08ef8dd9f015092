// --git-token-file and --api-token-file: a token read from a file (a mounted
// Kubernetes Secret), so that it never sits in argv or the environment.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "inflight/supervisor/config/settings.hpp"
#include "option_sources_testing.hpp"
#include "temp_dir.hpp"

namespace inflight {
namespace {

using namespace settings_testing;

std::string write(const TempDir& dir, const std::string& name, const std::string& content) {
  const auto path = dir.path() / name;
  std::ofstream(path, std::ios::binary) << content;
  return path.string();
}

TEST(TokenFile, GivesTheTokenWithOneTrailingNewlineDropped) {
  TempDir dir;
  const auto git = write(dir, "git-token", "git-secret\n");
  const auto api = write(dir, "api-token", "api secret\n\n");
  const auto s =
      read_serve_settings(sources({{"git-token-file", git}}, {{"INFLIGHT_API_TOKEN_FILE", api}}));
  EXPECT_EQ(s.store.git_token, "git-secret");
  EXPECT_EQ(s.store.git_token_file, git);
  EXPECT_EQ(s.api_token, "api secret\n");
  EXPECT_EQ(s.api_token_file, api);
}

// The run shim hides each secret file from children, given as configured
// (absolute; the shim resolves a Kubernetes Secret's link at each attempt);
// a missing one is not listed.
TEST(TokenFile, TheFilesToHideAreTheSecretFilesAsConfigured) {
  TempDir dir;
  const auto git = write(dir, "git-token", "git-secret\n");
  const auto api = write(dir, "api-token", "api-secret\n");
  const auto config = write(dir, "config.json", "{}");
  const auto link = dir.path() / "git-token-link";
  std::filesystem::create_symlink(git, link);
  const auto s = read_serve_settings(sources({{"git-token-file", link.string()},
                                              {"git-ssh-key", (dir.path() / "missing").string()},
                                              {"config", config},
                                              {"api-token-file", api}}));
  namespace fs = std::filesystem;
  EXPECT_EQ(s.hidden_files, (std::vector{link, fs::path(config), fs::path(api)}));
}

TEST(TokenFile, WorksFromTheConfigFileAndWithoutANewline) {
  TempDir dir;
  const auto git = write(dir, "git-token", "git-secret");
  const auto s = read_store_settings(sources({}, {}, {{"git_token_file", git}}));
  EXPECT_EQ(s.git_token, "git-secret");
}

TEST(TokenFile, WithoutAFileTheTokenIsReadAsBefore) {
  const auto s = read_serve_settings(
      sources({{"api-token", "from-flag"}}, {{"INFLIGHT_GIT_TOKEN", "from-env"}}));
  EXPECT_EQ(s.api_token, "from-flag");
  EXPECT_EQ(s.store.git_token, "from-env");
  EXPECT_TRUE(s.api_token_file.empty());
  EXPECT_TRUE(s.store.git_token_file.empty());
}

TEST(TokenFile, TheTokenAndItsFileTogetherAreRefusedNamingBoth) {
  TempDir dir;
  const auto file = write(dir, "token", "t\n");
  auto message = usage_error(sources({{"git-token", "x"}, {"git-token-file", file}}));
  EXPECT_TRUE(contains(message, "--git-token and --git-token-file")) << message;
  message = usage_error(sources({{"api-token-file", file}}, {{"INFLIGHT_API_TOKEN", "x"}}));
  EXPECT_TRUE(contains(message, "INFLIGHT_API_TOKEN and --api-token-file")) << message;
}

TEST(TokenFile, AMissingFileIsRefusedNamingTheOptionAndThePath) {
  TempDir dir;
  const auto missing = (dir.path() / "nope").string();
  const auto message = usage_error(sources({{"api-token-file", missing}}));
  EXPECT_TRUE(contains(message, "--api-token-file " + missing)) << message;
  EXPECT_TRUE(contains(message, "cannot be read")) << message;
}

TEST(TokenFile, AMissingFileGivenByTheEnvironmentIsRefusedNamingTheVariable) {
  const auto message = usage_error(sources({}, {{"INFLIGHT_GIT_TOKEN_FILE", "/nonexistent/t"}}));
  EXPECT_TRUE(contains(message, "INFLIGHT_GIT_TOKEN_FILE /nonexistent/t: cannot be read"))
      << message;
}

TEST(TokenFile, AnEmptyFileIsRefused) {
  TempDir dir;
  for (const char* content : {"", "\n"}) {
    const auto message = usage_error(sources({{"git-token-file", write(dir, "t", content)}}));
    EXPECT_TRUE(contains(message, "--git-token-file")) << message;
    EXPECT_TRUE(contains(message, "is empty")) << message;
  }
}

TEST(TokenFile, AFileOverTheBoundIsRefused) {
  TempDir dir;
  const auto at_bound = write(dir, "at", std::string(kMaxTokenFileBytes, 'a'));
  EXPECT_EQ(read_store_settings(sources({{"git-token-file", at_bound}})).git_token.size(),
            kMaxTokenFileBytes);
  const auto over = write(dir, "over", std::string(kMaxTokenFileBytes + 1, 'a'));
  const auto message = usage_error(sources({{"git-token-file", over}}));
  EXPECT_TRUE(contains(message, "--git-token-file " + over)) << message;
  EXPECT_TRUE(contains(message, "64 KiB")) << message;
}

TEST(TokenFile, APublicListenAcceptsTheTokenFromItsFile) {
  TempDir dir;
  const auto file = write(dir, "api", "s3cret\n");
  EXPECT_EQ(read_serve_settings(sources({{"listen", "0.0.0.0:3117"}, {"api-token-file", file}}))
                .api_token,
            "s3cret");
}

TEST(WithheldVariables, AreTheReferencesOfEveryTemplate) {
  const OrderedJson file{
      {"children",
       {{"a", {{"argv", {"tool"}}, {"env", {{"KEY", "${A_SECRET}"}, {"PLAIN", "x"}}}}},
        {"b", {{"argv", {"tool"}}, {"env", {{"KEY", "${B_SECRET}"}}}}}}}};
  EXPECT_EQ(read_resume_settings(sources({}, {}, file)).store.withheld_variables,
            (std::set<std::string>{"A_SECRET", "B_SECRET"}));
}

}  // namespace
}  // namespace inflight
