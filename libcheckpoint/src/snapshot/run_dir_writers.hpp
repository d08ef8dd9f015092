// Restored run dirs written from two threads. Where creating a file costs up
// to a millisecond (a node whose page cache the host reclaims), a restore of
// many runs waits mostly on file creation, and two writers halve that wait;
// on a quick disk they cost nothing. libgit2 handles are one thread's at a
// time, so each writer reads the cache through a handle of its own: the tips
// it reads were downloaded to disk, never held in this process's memory.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "git/git_handle.hpp"
#include "inflight/checkpoint/git_store.hpp"
#include "snapshot/tree_validation.hpp"

namespace inflight::checkpoint {

class RunDirWriters {
 public:
  explicit RunDirWriters(std::filesystem::path cache_path);
  ~RunDirWriters() { stop(); }
  RunDirWriters(const RunDirWriters&) = delete;
  RunDirWriters& operator=(const RunDirWriters&) = delete;

  // materialize_tree() of `commit` into `run_dir` on a writer: the complete
  // lines of its file `counted` (none when empty), or its failure.
  std::future<std::uint64_t> write(ValidatedCommit commit, std::filesystem::path run_dir,
                                   std::string counted);
  // Jobs not started are dropped (their futures break); those under way end.
  void stop();

 private:
  using Job = std::packaged_task<std::uint64_t(RepositoryHandle& cache)>;
  void work();

  const std::filesystem::path cache_path_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;  // started by the first write()
};

}  // namespace inflight::checkpoint
