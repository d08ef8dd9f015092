#include "snapshot/run_dir_writers.hpp"

#include "git/cache_repo_impl.hpp"
#include "snapshot/materialize.hpp"

namespace inflight::checkpoint {

constexpr int kWriters = 2;

RunDirWriters::RunDirWriters(std::filesystem::path cache_path)
    : cache_path_(std::move(cache_path)) {}

void RunDirWriters::stop() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
}

std::future<std::uint64_t> RunDirWriters::write(ValidatedCommit commit,
                                                std::filesystem::path run_dir,
                                                std::string counted) {
  Job job([this, commit = std::move(commit), run_dir = std::move(run_dir),
           counted = std::move(counted)](RepositoryHandle& cache) {
    if (!cache) cache = open_bare(cache_path_);
    return materialize_tree(cache.get(), commit, run_dir, counted);
  });
  auto done = job.get_future();
  {
    const std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
  // Started by the first dir: most restores write none.
  while (threads_.size() < kWriters) threads_.emplace_back([this] { work(); });
  return done;
}

void RunDirWriters::work() {
  RepositoryHandle cache;  // opened by the first job, whose failure it is
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job(cache);
  }
}

}  // namespace inflight::checkpoint
