// The snapshot walk opens only what it judged: an entry swapped between its
// stat and its open (a symbolic link for a directory, a FIFO or another file
// for a file) is refused, at once, and nothing is read through it.
#include "snapshot/run_dir_entries.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "checkpoint/checkpoint_test_support.hpp"

namespace inflight::checkpoint::testing {
namespace {

using std::chrono::seconds;

class RunDirEntriesTest : public CheckpointTest {
 protected:
  void SetUp() override { fs::create_directories(run_dir()); }
  // The directory a swapped-in link points at: outside the run dir.
  fs::path outside() const { return temp_.path() / "outside"; }
};

// Runs `open` on a thread; when it has not returned within a few seconds it
// is taken to block on the FIFO at `fifo`, which a writer then unblocks so
// that the test ends. True when it returned on its own.
template <class Open>
bool returns_promptly(Open open, const fs::path& fifo) {
  std::packaged_task<void()> task(open);
  auto done = task.get_future();
  std::thread thread(std::move(task));
  const bool prompt = done.wait_for(seconds(5)) == std::future_status::ready;
  if (!prompt) ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));
  thread.join();
  return prompt;
}

TEST_F(RunDirEntriesTest, ASymbolicLinkInPlaceOfTheDirectoryJudgedIsNotOpened) {
  fs::create_directories(run_dir() / "a");
  write_file(outside() / "secret", "serve's secret");
  OpenDir root = open_run_dir(run_dir());
  const auto judged = stat_entry(root, "a");
  ASSERT_TRUE(judged);
  ASSERT_TRUE(S_ISDIR(judged->st_mode));

  fs::remove(run_dir() / "a");
  fs::create_directory_symlink(outside(), run_dir() / "a");
  EXPECT_FALSE(open_dir_entry(root, "a", *judged));
  // Not even when the stat is the link's target's own: the link is not followed.
  struct stat target {};
  ASSERT_EQ(::stat(outside().c_str(), &target), 0);
  EXPECT_FALSE(open_dir_entry(root, "a", target));
}

TEST_F(RunDirEntriesTest, TheDirectoryJudgedIsOpenedAndListed) {
  write_file(run_dir() / "a" / "kept", "k");
  OpenDir root = open_run_dir(run_dir());
  auto dir = open_dir_entry(root, "a", *stat_entry(root, "a"));
  ASSERT_TRUE(dir);
  EXPECT_EQ(dir->next_name(), "kept");
  EXPECT_EQ(dir->next_name(), std::nullopt);
}

TEST_F(RunDirEntriesTest, AFifoInPlaceOfTheFileJudgedIsRefusedWithoutBlocking) {
  write_file(run_dir() / "f", "data");
  OpenDir root = open_run_dir(run_dir());
  const auto judged = stat_entry(root, "f");
  ASSERT_TRUE(judged);
  fs::remove(run_dir() / "f");
  ASSERT_EQ(::mkfifo((run_dir() / "f").c_str(), 0600), 0);
  const auto fifo = stat_entry(root, "f");
  ASSERT_TRUE(fifo);

  std::optional<Fd> as_judged, as_fifo;
  EXPECT_TRUE(
      returns_promptly([&] { as_judged = open_file_entry(root, "f", *judged); }, run_dir() / "f"));
  EXPECT_TRUE(
      returns_promptly([&] { as_fifo = open_file_entry(root, "f", *fifo); }, run_dir() / "f"));
  EXPECT_FALSE(as_judged);
  EXPECT_FALSE(as_fifo);  // the same inode, but not a regular file
}

TEST_F(RunDirEntriesTest, AFileReplacedBetweenStatAndOpenIsRefused) {
  write_file(run_dir() / "f", "judged");
  OpenDir root = open_run_dir(run_dir());
  const auto judged = stat_entry(root, "f");
  ASSERT_TRUE(judged);
  write_file(run_dir() / "f.new", "swapped in");
  fs::rename(run_dir() / "f.new", run_dir() / "f");
  EXPECT_FALSE(open_file_entry(root, "f", *judged));

  auto now = open_file_entry(root, "f", *stat_entry(root, "f"));
  ASSERT_TRUE(now);
  char buffer[32] = {};
  EXPECT_EQ(::read(now->get(), buffer, sizeof buffer - 1), 10);
  EXPECT_STREQ(buffer, "swapped in");
}

TEST_F(RunDirEntriesTest, AFileDeletedAfterItsStatIsRefused) {
  write_file(run_dir() / "f", "gone");
  OpenDir root = open_run_dir(run_dir());
  const auto judged = stat_entry(root, "f");
  ASSERT_TRUE(judged);
  fs::remove(run_dir() / "f");
  EXPECT_FALSE(open_file_entry(root, "f", *judged));
  EXPECT_FALSE(stat_entry(root, "f"));
}

TEST_F(RunDirEntriesTest, ARunDirThatIsASymbolicLinkIsNotOpened) {
  fs::create_directories(outside());
  fs::create_directory_symlink(outside(), temp_.path() / "linked-run");
  EXPECT_THROW(open_run_dir(temp_.path() / "linked-run"), GitError);
}

}  // namespace
}  // namespace inflight::checkpoint::testing
