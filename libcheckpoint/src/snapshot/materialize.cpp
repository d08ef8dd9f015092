// Writes a validated checkpoint tree into a run dir through directory file
// descriptors, so that a symlink planted in the run dir is replaced, never
// followed.
#include "snapshot/materialize.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <future>
#include <span>
#include <vector>

#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/repo_objects.hpp"
#include "inflight/core/fd.hpp"
#include "snapshot/chunked_file.hpp"
#include "snapshot/tree_validation.hpp"

namespace inflight::checkpoint {

namespace {

Fd open_dir_at(int parent, const std::string& name, const std::string& path) {
  Fd dir(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) throw_errno("open directory", path);
  return dir;
}

// Whatever is in the way (a file, a symlink) is removed rather than followed.
Fd make_dir_at(int parent, const std::string& name, const std::string& path) {
  struct stat st {};
  if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
      ::unlinkat(parent, name.c_str(), 0) != 0) {
    throw_errno("remove", path);
  }
  if (::mkdirat(parent, name.c_str(), 0777) != 0 && errno != EEXIST)
    throw_errno("create directory", path);
  return open_dir_at(parent, name, path);
}

class TreeWriter {
 public:
  // `on_disk`: every object is on disk, so that another handle of the
  // repository, on another thread, may read them. `counted`: the path whose
  // complete lines lines() says, counted as written (a restore's progress
  // file, which would otherwise be read again to be counted).
  TreeWriter(git_repository* repo, bool on_disk, const std::string& counted)
      : repo_(repo),
        disk_path_(on_disk ? git_repository_path(repo) : ""),
        counted_(std::filesystem::path(counted).lexically_normal().generic_string()) {}

  std::uint64_t lines() const { return lines_; }

  void directory(int dir, const git_tree* tree, const std::string& prefix) {
    for (std::size_t i = 0; i < git_tree_entrycount(tree); ++i) {
      const git_tree_entry* entry = git_tree_entry_byindex(tree, i);
      const std::string name = target_name(entry);
      const std::string path = prefix + name;
      if (git_tree_entry_filemode(entry) != GIT_FILEMODE_TREE) {
        blob_file(dir, name, path, entry);
      } else if (has_chunk_suffix(git_tree_entry_name(entry))) {
        chunked_file(dir, name, path, entry);
      } else {
        const Fd sub = make_dir_at(dir, name, path);
        directory(sub.get(), lookup_tree(repo_, *git_tree_entry_id(entry)).get(), path + "/");
      }
    }
  }

 private:
  void blob_file(int dir, const std::string& name, const std::string& path,
                 const git_tree_entry* entry) {
    git_blob* raw = nullptr;
    git_check(git_blob_lookup(&raw, repo_, git_tree_entry_id(entry)), "read " + path);
    const BlobHandle blob(raw);
    const bool executable = git_tree_entry_filemode(entry) == GIT_FILEMODE_BLOB_EXECUTABLE;
    const std::string_view content(static_cast<const char*>(git_blob_rawcontent(blob.get())),
                                   static_cast<std::size_t>(git_blob_rawsize(blob.get())));
    const Fd file = create_file(dir, name, path, executable);
    write_all(file.get(), content, path);
    if (path == counted_) lines_ = complete_lines(content);
  }

  void chunked_file(int dir, const std::string& name, const std::string& path,
                    const git_tree_entry* entry) {
    const TreeHandle chunks = lookup_tree(repo_, *git_tree_entry_id(entry));
    std::vector<git_oid> ids;
    for_each_chunk_id(repo_, chunks.get(), path + std::string(kChunkSuffix),
                      [&](const git_oid& id, const std::string&) { ids.push_back(id); });
    const Fd file = create_file(dir, name, path, false);
    const auto lines = write_chunks(file.get(), ids, path);
    if (path == counted_) lines_ = lines;
  }

  // The download's indexer inflated every chunk once already; a big file's
  // second inflate is shared by two threads, each writing its half at its
  // offset through a repository handle of its own. Returns the lines written.
  std::uint64_t write_chunks(int fd, std::span<const git_oid> ids, const std::string& path) {
    if (disk_path_.empty() || ids.size() < 2 * kChunksPerGroup)
      return write_at(repo_, fd, ids, 0, path, nullptr);
    const auto first = ids.first(ids.size() / 2);
    const auto offset = static_cast<off_t>(bytes_of(first, path));
    std::atomic<bool> failed = false;  // the other half stops early
    auto second = std::async(std::launch::async, [&] {
      const RepositoryHandle other = open_bare(disk_path_);
      return write_at(other.get(), fd, ids.subspan(first.size()), offset, path, &failed);
    });
    std::uint64_t lines = 0;
    try {
      lines = write_at(repo_, fd, first, 0, path, nullptr);
    } catch (...) {
      failed = true;
      throw;  // the future waits for its thread
    }
    return lines + second.get();
  }

  std::uint64_t bytes_of(std::span<const git_oid> ids, const std::string& path) {
    const OdbHandle odb = open_odb(repo_);
    std::uint64_t bytes = 0;
    for (const auto& id : ids) {
      std::size_t size = 0;
      git_object_t type{};
      git_check(git_odb_read_header(&size, &type, odb.get(), &id), "read a chunk of " + path);
      bytes += size;
    }
    return bytes;
  }

  // The complete lines of the chunks written (a line split across two
  // chunks counts once, at its newline): counted while in the cache.
  static std::uint64_t write_at(git_repository* repo, int fd, std::span<const git_oid> ids,
                                off_t offset, const std::string& path,
                                const std::atomic<bool>* stop) {
    std::uint64_t lines = 0;
    for (const auto& id : ids) {
      if (stop != nullptr && *stop) return lines;
      git_blob* raw = nullptr;
      git_check(git_blob_lookup(&raw, repo, &id), "read a chunk of " + path);
      const BlobHandle blob(raw);
      const std::string_view chunk(static_cast<const char*>(git_blob_rawcontent(blob.get())),
                                   static_cast<std::size_t>(git_blob_rawsize(blob.get())));
      write_all_at(fd, chunk, offset, path);
      lines += complete_lines(chunk);
      offset += static_cast<off_t>(chunk.size());
    }
    return lines;
  }

  // Replaces any existing entry, so a planted symlink is never written through.
  // The mode is the creating process's umask applied, as for any file it writes.
  static Fd create_file(int dir, const std::string& name, const std::string& path,
                        bool executable) {
    if (::unlinkat(dir, name.c_str(), 0) != 0 && errno != ENOENT) throw_errno("replace", path);
    const mode_t mode = executable ? 0777 : 0666;
    Fd file(
        ::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (!file) throw_errno("create", path);
    return file;
  }

  git_repository* repo_;
  const std::filesystem::path disk_path_;  // empty: objects may be in memory
  const std::string counted_;
  std::uint64_t lines_ = 0;
};

// The run dir to write into, made when it is missing.
Fd create_run_dir(const std::filesystem::path& run_dir) {
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec) throw GitError(Failure::other, "create " + run_dir.string() + ": " + ec.message());
  Fd dir(::open(run_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) throw_errno("open run dir", run_dir.string());
  return dir;
}

std::uint64_t write_run_dir(git_repository* git, const ValidatedCommit& commit,
                            const std::filesystem::path& run_dir, bool on_disk,
                            const std::string& counted) {
  const TreeHandle tree = tree_of(lookup_commit(git, commit.commit()).get());
  const Fd dir = create_run_dir(run_dir);
  TreeWriter writer(git, on_disk, counted);
  writer.directory(dir.get(), tree.get(), "");
  return writer.lines();
}

}  // namespace

void materialize(CacheRepo& repo, const std::string& commit, const std::filesystem::path& run_dir,
                 const TreeLimits& limits) {
  write_run_dir(raw_repo(repo), ValidatedCommit(raw_repo(repo), commit, limits), run_dir,
                /*on_disk=*/false, "");
}

std::uint64_t materialize_tree(git_repository* git, const ValidatedCommit& commit,
                               const std::filesystem::path& run_dir, const std::string& counted) {
  return write_run_dir(git, commit, run_dir, /*on_disk=*/true, counted);
}

}  // namespace inflight::checkpoint
