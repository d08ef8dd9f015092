// Secrets overwritten where the kernel shows them, on synthetic argv and
// environment blocks laid out as the kernel lays them out (one buffer of
// NUL-terminated strings), and the process made non-dumpable.
#include "inflight/core/process_secrecy.hpp"

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace inflight {
namespace {

// NUL-terminated strings back to back in one buffer, with a null-terminated
// pointer array into it: what /proc/<pid>/cmdline and environ read.
class Block {
 public:
  explicit Block(const std::vector<std::string>& strings) {
    for (const auto& s : strings) text_.append(s).push_back('\0');
    for (std::size_t at = 0; at < text_.size(); at += std::strlen(text_.data() + at) + 1)
      pointers_.push_back(text_.data() + at);
    pointers_.push_back(nullptr);
  }
  char** pointers() { return pointers_.data(); }
  int count() const { return static_cast<int>(pointers_.size()) - 1; }
  // What the kernel would show: the whole buffer.
  const std::string& text() const { return text_; }
  bool shows(const std::string& part) const { return text_.find(part) != std::string::npos; }

 private:
  std::string text_;
  std::vector<char*> pointers_;
};

TEST(BlankFlagValues, OverwritesBothFormsOfEachFlagAndNothingElse) {
  Block argv({"inflight", "serve", "--api-token", "api-secret", "--git-token=git-secret",
              "--listen", "127.0.0.1:0", "--git-token-file", "/run/git-token"});
  const auto size = argv.text().size();
  blank_flag_values(argv.count(), argv.pointers(), {"--git-token", "--api-token"});
  EXPECT_FALSE(argv.shows("api-secret")) << argv.text();
  EXPECT_FALSE(argv.shows("git-secret")) << argv.text();
  EXPECT_EQ(argv.text().size(), size);
  EXPECT_STREQ(argv.pointers()[2], "--api-token");
  EXPECT_STREQ(argv.pointers()[3], "**********");
  EXPECT_STREQ(argv.pointers()[4], "--git-token=**********");
  EXPECT_STREQ(argv.pointers()[6], "127.0.0.1:0");
  EXPECT_STREQ(argv.pointers()[8], "/run/git-token");
}

TEST(BlankFlagValues, AFlagWithoutValueAtTheEndTouchesNothing) {
  Block argv({"inflight", "serve", "--api-token"});
  const auto before = argv.text();
  blank_flag_values(argv.count(), argv.pointers(), {"--api-token"});
  EXPECT_EQ(argv.text(), before);
}

TEST(EnvironmentSecrets, HeapCopiesKeepEveryValueWhileTheOriginalIsBlanked) {
  Block env({"PATH=/bin", "INFLIGHT_API_TOKEN=api-secret", "OPENAI_API_KEY=sk-openai",
             "INFLIGHT_LISTEN=0.0.0.0:1", "HOME=/home/x"});
  char** block = env.pointers();
  char** original = move_environment_to_heap(block);
  EXPECT_EQ(original, env.pointers());
  ASSERT_NE(block, env.pointers());
  blank_environment_values(
      original, [](std::string_view name) { return is_secret_variable(name, {"OPENAI_API_KEY"}); });
  EXPECT_FALSE(env.shows("api-secret")) << env.text();
  EXPECT_FALSE(env.shows("sk-openai")) << env.text();
  EXPECT_FALSE(env.shows("0.0.0.0")) << env.text();
  EXPECT_TRUE(env.shows("PATH=/bin")) << env.text();
  EXPECT_TRUE(env.shows("HOME=/home/x")) << env.text();
  EXPECT_TRUE(env.shows("INFLIGHT_API_TOKEN=**********")) << env.text();
  const std::vector<std::string> copies(block, block + 5);
  EXPECT_EQ(copies, (std::vector<std::string>{"PATH=/bin", "INFLIGHT_API_TOKEN=api-secret",
                                              "OPENAI_API_KEY=sk-openai",
                                              "INFLIGHT_LISTEN=0.0.0.0:1", "HOME=/home/x"}));
  EXPECT_EQ(block[5], nullptr);
  for (char** copy = block; *copy != nullptr; ++copy) std::free(*copy);
  std::free(block);
}

TEST(EnvironmentSecrets, InflightVariablesAndTheNamedOnesAreSecret) {
  EXPECT_TRUE(is_secret_variable("INFLIGHT_GIT_TOKEN", {}));
  EXPECT_TRUE(is_secret_variable("OPENAI_API_KEY", {"OPENAI_API_KEY"}));
  EXPECT_FALSE(is_secret_variable("OPENAI_API_KEY", {}));
  EXPECT_FALSE(is_secret_variable("PATH", {"OPENAI_API_KEY"}));
}

// The process's own environment, swapped for a synthetic block for the test.
TEST(EnvironmentSecrets, GetenvStillFindsABlankedValue) {
  Block env({"PATH=/bin", "INFLIGHT_UNIT_TEST_SECRET=still-here"});
  char** const saved = environ;
  environ = env.pointers();
  char** original = move_environment_to_heap(environ);
  blank_environment_values(original,
                           [](std::string_view name) { return is_secret_variable(name, {}); });
  const char* found = std::getenv("INFLIGHT_UNIT_TEST_SECRET");
  const std::string value = found ? found : "<unset>";
  EXPECT_FALSE(env.shows("still-here")) << env.text();
  for (char** copy = environ; *copy != nullptr; ++copy) std::free(*copy);
  std::free(environ);
  environ = saved;
  EXPECT_EQ(value, "still-here");
}

TEST(ForbidInspection, MakesTheProcessNonDumpable) {
  ASSERT_EQ(::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 1);
  forbid_inspection();
  EXPECT_EQ(::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 0);
  ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);  // the rest of the tests, and the leak check
}

TEST(ContinueInUnopenedMemory, TheParentExitsWithTheChildsCode) {
  EXPECT_EXIT(
      {
        const pid_t before = ::getpid();
        continue_in_unopened_memory();
        std::_Exit(::getpid() != before && ::getppid() == before ? 7 : 1);
      },
      ::testing::ExitedWithCode(7), "");
}

TEST(ContinueInUnopenedMemory, TheParentDiesOfTheChildsSignal) {
  EXPECT_EXIT(
      {
        continue_in_unopened_memory();
        std::signal(SIGUSR1, SIG_DFL);
        ::raise(SIGUSR1);
      },
      ::testing::KilledBySignal(SIGUSR1), "");
}

TEST(ContinueInUnopenedMemory, TheChildIsBornNonDumpable) {
  EXPECT_EXIT(
      {
        forbid_inspection();
        continue_in_unopened_memory();
        std::_Exit(::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace inflight
