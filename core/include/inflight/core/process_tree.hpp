// The processes below one process, read from /proc: how the run shim finds
// every descendant of a run, including those that left its process group or
// session, to end them all, and how serve ends what a dead shim left
// (docs/security.md "Process containment").
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "inflight/core/fd.hpp"

namespace inflight {

struct ProcessLink {
  pid_t pid = 0;
  pid_t ppid = 0;
};

// The parent pid in the text of /proc/PID/stat; nullopt for text that is not
// one. The command name may hold spaces and parentheses: the fields after
// the last ')' are read.
std::optional<pid_t> ppid_from_stat(std::string_view stat);

// The parent pid of `pid` now; nullopt once it is gone.
std::optional<pid_t> read_ppid(pid_t pid);

// Every process whose chain of parents leads to `root` (root excluded), in
// no particular order.
std::vector<pid_t> descendants_of(pid_t root, std::span<const ProcessLink> links);

// The parent link of every process /proc shows now; a process that ends
// while it is read is left out.
std::vector<ProcessLink> read_process_links();

// SIGKILL to every process below `root` that is neither one of `spared` nor
// below one, as /proc shows them now. Each is signalled through a pidfd once
// its parent is seen unchanged, so a pid freed and reused meanwhile is spared.
// A process whose parent changed since /proc was read (its parent, killed,
// ended: a subreaper `root` inherits it) is looked at again in a new read,
// until a read finds no process that changed and none not yet signalled.
// Returns how many were signalled: processes forked meanwhile need another
// call. `read_links` is read_process_links(), or a test's. `exits`, when
// given, receives the pidfd of each process signalled: readable once it has
// ended, since a SIGKILL is sent when kill returns, not yet obeyed.
std::size_t kill_descendants(
    pid_t root, std::span<const pid_t> spared = {},
    const std::function<std::vector<ProcessLink>()>& read_links = read_process_links,
    std::vector<Fd>* exits = nullptr);

// Waits until every process of `exits` (pidfds) has ended, or `limit` has
// passed; false in that case.
bool wait_ended(const std::vector<Fd>& exits, std::chrono::milliseconds limit);

}  // namespace inflight
