// Non-dumpable processes and secrets overwritten where the kernel shows them:
// see process_secrecy.hpp for what each layer stops.
#include "inflight/core/process_secrecy.hpp"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern char** environ;

#if defined(__SANITIZE_ADDRESS__)
#define INFLIGHT_LEAK_CHECK_AT_EXIT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define INFLIGHT_LEAK_CHECK_AT_EXIT 1
#endif
#endif

namespace inflight {

namespace {

// What replaces a secret: the same length, so that every other byte of
// argv and of the environment block stays where the kernel expects it.
constexpr char kBlank = '*';

void blank(char* value) {
  std::fill(value, value + std::strlen(value), kBlank);
}

#ifdef INFLIGHT_LEAK_CHECK_AT_EXIT
// LeakSanitizer ptraces the process from a helper thread, which a
// non-dumpable process refuses. Registered from main, after the sanitizer's
// own handler, so it runs before it.
void allow_leak_check() {
  ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
}
#endif

}  // namespace

void forbid_inspection() {
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
#ifdef INFLIGHT_LEAK_CHECK_AT_EXIT
  std::atexit(allow_leak_check);
#endif
}

void continue_in_unopened_memory() {
  const pid_t child = ::fork();
  if (child == 0) return;
  if (child < 0) {
    std::perror("fork");
    ::_exit(EXIT_FAILURE);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) ::_exit(EXIT_FAILURE);
  }
  if (WIFEXITED(status)) ::_exit(WEXITSTATUS(status));
  const int signal = WTERMSIG(status);
  std::signal(signal, SIG_DFL);
  ::raise(signal);
  ::_exit(128 + signal);
}

void blank_flag_values(int argc, char** argv, std::initializer_list<std::string_view> flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    for (const auto flag : flags) {
      if (arg == flag && i + 1 < argc) blank(argv[i + 1]);
      if (arg.size() > flag.size() && arg.starts_with(flag) && arg[flag.size()] == '=')
        blank(argv[i] + flag.size() + 1);
    }
  }
}

char** move_environment_to_heap(char**& block) {
  std::size_t count = 0;
  while (block[count] != nullptr) ++count;
  // Never freed: getenv reads it until the process ends.
  auto** copy = static_cast<char**>(std::calloc(count + 1, sizeof(char*)));
  if (copy == nullptr) std::abort();
  for (std::size_t i = 0; i < count; ++i) {
    copy[i] = ::strdup(block[i]);
    if (copy[i] == nullptr) std::abort();
  }
  char** original = block;
  block = copy;
  return original;
}

void blank_environment_values(char** original,
                              const std::function<bool(std::string_view name)>& is_secret) {
  for (char** entry = original; *entry != nullptr; ++entry) {
    char* equals = std::strchr(*entry, '=');
    if (equals != nullptr && is_secret(std::string_view(*entry, equals - *entry)))
      blank(equals + 1);
  }
}

bool is_secret_variable(std::string_view name, const std::set<std::string>& extra) {
  return name.starts_with("INFLIGHT_") || extra.count(std::string(name)) > 0;
}

void hide_environment_secrets(const std::set<std::string>& extra) {
  static char** const original = move_environment_to_heap(environ);
  blank_environment_values(original,
                           [&](std::string_view name) { return is_secret_variable(name, extra); });
}

}  // namespace inflight
