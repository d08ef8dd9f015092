// Where a child's program is found: PATH's directories only, never the
// directory serve happened to start in.
#include "inflight/core/program_path.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include "temp_dir.hpp"

namespace inflight {
namespace {

// Sets PATH (or unsets it) and the working directory for one test.
class ScopedPath {
 public:
  ScopedPath(const std::optional<std::string>& path, const std::filesystem::path& cwd)
      : old_path_(std::getenv("PATH") ? std::optional<std::string>(std::getenv("PATH"))
                                      : std::nullopt),
        old_cwd_(std::filesystem::current_path()) {
    set(path);
    std::filesystem::current_path(cwd);
  }
  ~ScopedPath() {
    set(old_path_);
    std::filesystem::current_path(old_cwd_);
  }

 private:
  static void set(const std::optional<std::string>& path) {
    if (path)
      ::setenv("PATH", path->c_str(), 1);
    else
      ::unsetenv("PATH");
  }
  std::optional<std::string> old_path_;
  std::filesystem::path old_cwd_;
};

void make_program(const std::filesystem::path& file) {
  std::ofstream(file) << "#!/bin/sh\n";
  ::chmod(file.c_str(), 0755);
}

TEST(FindOnPath, FindsTheFirstExecutableInPathOrder) {
  TempDir first, second;
  make_program(second.path() / "tool");
  std::ofstream(first.path() / "tool") << "not executable\n";
  std::filesystem::create_directory(first.path() / "dir-tool");
  ScopedPath scoped(first.path().string() + ":" + second.path().string(), second.path());
  EXPECT_EQ(find_on_path("tool"), second.path() / "tool");
  EXPECT_FALSE(find_on_path("dir-tool").has_value());  // a directory is no program
}

TEST(FindOnPath, NeverLooksInTheCurrentDirectory) {
  TempDir cwd, bin;
  make_program(cwd.path() / "tool");
  for (const auto& path : {std::optional<std::string>{}, std::optional<std::string>{""},
                           std::optional<std::string>{bin.path().string() + ":"},
                           std::optional<std::string>{":" + bin.path().string()},
                           std::optional<std::string>{bin.path().string() + "::/nonexistent"}}) {
    ScopedPath scoped(path, cwd.path());
    EXPECT_FALSE(find_on_path("tool").has_value()) << "PATH=" << path.value_or("(unset)");
    EXPECT_TRUE(program_problem("tool", cwd.path()).has_value());
  }
}

}  // namespace
}  // namespace inflight
