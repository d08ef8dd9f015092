// Keeps inflight's secrets (the API and git tokens, the `${NAME}` variables of
// the child templates) out of what a child can read about its supervisor
// (docs/security.md "Secrets and children"). A child runs as the same user: without
// this, /proc/<pid>/cmdline shows a token given as a flag, /proc/<pid>/environ
// every variable serve started with, and /proc/<pid>/mem the rest.
//
// Two layers. A non-dumpable process's environ, mem and ptrace need
// CAP_SYS_PTRACE. cmdline stays readable by anyone, and environ is readable
// in the moment between a helper's exec and its first line of main, so the
// values themselves are also overwritten in the memory the kernel shows there.
#pragma once

#include <functional>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>

namespace inflight {

// PR_SET_DUMPABLE 0, first thing in main. In a sanitizer build, the process
// is made dumpable again at exit, before LeakSanitizer (which ptraces it)
// looks for leaks.
void forbid_inspection();

// A /proc/<pid>/mem opened in the moment between exec and
// forbid_inspection keeps reading this process's memory. Called after
// forbid_inspection and before any secret is read, this forks: the child
// goes on in a copy of the memory that nothing has open (non-dumpable from
// its birth), while the parent only waits and exits as the child did (the
// same code, or killed by the same signal). For a helper that is started
// while children run, and whose group is what gets signalled.
void continue_in_unopened_memory();

// Overwrites, in place, the value of each of `flags` in argv: both
// `--flag value` and `--flag=value`. Call it once argv has been parsed.
void blank_flag_values(int argc, char** argv, std::initializer_list<std::string_view> flags);

// Points `block` at heap copies of its entries (so that getenv keeps
// finding every value) and returns the original array, whose strings are
// what /proc/<pid>/environ shows.
char** move_environment_to_heap(char**& block);

// Overwrites, in place, the value of every entry of `original` whose name
// `is_secret` picks.
void blank_environment_values(char** original,
                              const std::function<bool(std::string_view name)>& is_secret);

// True for inflight's own variables, INFLIGHT_*, and for the names in `extra`.
bool is_secret_variable(std::string_view name, const std::set<std::string>& extra);

// The process's own environment: moved to the heap on the first call, then
// every INFLIGHT_* variable and every name in `extra` blanked where the
// kernel shows it. getenv still returns every value.
void hide_environment_secrets(const std::set<std::string>& extra);

}  // namespace inflight
