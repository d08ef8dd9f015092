#include "git/pack_writer.hpp"

#include <fcntl.h>
#include <git2/sys/odb_backend.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include "git/git_error.hpp"
#include "git/oid_text.hpp"
#include "git/pack_indexer.hpp"
#include "git/repo_objects.hpp"
#include "inflight/core/fd.hpp"

namespace inflight::checkpoint {

namespace {

namespace fs = std::filesystem;

// Ahead of libgit2's own backends (loose 1, packed 2) and of the cache's
// in-memory one (999), which writes no packs.
constexpr int kPriority = 1000;
constexpr std::size_t kReplayBlock = 1 << 20;

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// A file written in objects/pack, removed unless kept under its pack name.
class PackDirFile {
 public:
  explicit PackDirFile(const fs::path& dir)
      : path_((dir / "tmp_pack_inflight_XXXXXX").string()), fd_(::mkstemp(path_.data())) {
    if (!fd_) throw_errno("create a file in " + dir.string());
  }
  ~PackDirFile() {
    if (!kept_) ::unlink(path_.c_str());
  }
  PackDirFile(const PackDirFile&) = delete;
  PackDirFile& operator=(const PackDirFile&) = delete;

  // All of `bytes`, or throws; size() counts only what was written whole.
  void write(std::span<const unsigned char> bytes) {
    write_all(fd_.get(), {reinterpret_cast<const char*>(bytes.data()), bytes.size()}, path_);
    size_ += bytes.size();
  }

  void read_at(std::uint64_t offset, std::span<unsigned char> out) const {
    for (std::size_t done = 0; done < out.size();) {
      const ssize_t n = ::pread(fd_.get(), out.data() + done, out.size() - done,
                                static_cast<off_t>(offset + done));
      if (n == 0) throw std::runtime_error(path_ + " is shorter than written");
      if (n < 0 && errno != EINTR) throw_errno("read " + path_);
      done += n > 0 ? static_cast<std::size_t>(n) : 0;
    }
  }

  std::uint64_t size() const { return size_; }

  // Read-only, as git's own pack files.
  void keep_as(const fs::path& name) {
    if (::fchmod(fd_.get(), 0444) != 0 || ::rename(path_.c_str(), name.c_str()) != 0)
      throw_errno("rename " + path_ + " to " + name.string());
    kept_ = true;
  }

 private:
  std::string path_;
  Fd fd_;
  std::uint64_t size_ = 0;
  bool kept_ = false;
};

// One pack being written.
struct Writepack {
  // Spelt out: clang 14, the fuzz build's compiler, cannot make an aggregate from parentheses.
  Writepack(git_odb_backend* next, PackHandovers& handovers, git_odb* odb,
            git_indexer_progress_cb progress, void* payload, fs::path pack_dir)
      : next(next),
        handovers(handovers),
        odb(odb),
        progress(progress),
        payload(payload),
        pack_dir(std::move(pack_dir)) {}

  git_odb_backend* next;  // libgit2's packed backend
  PackHandovers& handovers;
  git_odb* odb;
  git_indexer_progress_cb progress;
  void* payload;
  fs::path pack_dir;
  std::optional<PackDirFile> pack;  // while the index reads it
  PackIndexer index;
  git_odb_writepack* handed_to = nullptr;  // libgit2's, once the index gave up
};

// libgit2 calls with a pointer to `base`, the first member of a
// standard-layout struct, which is a pointer to the struct.
struct WritepackHandle {
  git_odb_writepack base;
  Writepack* writepack;
};
static_assert(std::is_standard_layout_v<WritepackHandle>);

Writepack& writepack_of(git_odb_writepack* base) {
  return *reinterpret_cast<WritepackHandle*>(base)->writepack;
}

// A failure of our own, as libgit2 reports one.
int failed(const std::exception& e) {
  git_error_set_str(GIT_ERROR_OS, e.what());
  return -1;
}

// The pack so far to libgit2's writer, then `rest`, and from then on all.
int hand_over(Writepack& w, std::span<const unsigned char> rest, git_indexer_progress* stats,
              std::string why) {
  w.handovers.reasons.push_back(std::move(why));
  if (const int rc = w.next->writepack(&w.handed_to, w.next, w.odb, w.progress, w.payload); rc < 0)
    return rc;
  stats->total_objects = stats->received_objects = 0;  // libgit2's indexer counts them again
  std::vector<unsigned char> block(kReplayBlock);
  for (std::uint64_t at = 0; at < w.pack->size(); at += block.size()) {
    const auto piece =
        std::span(block).first(std::min<std::uint64_t>(block.size(), w.pack->size() - at));
    w.pack->read_at(at, piece);
    if (const int rc = w.handed_to->append(w.handed_to, piece.data(), piece.size(), stats); rc < 0)
      return rc;
  }
  w.pack.reset();
  return rest.empty() ? 0 : w.handed_to->append(w.handed_to, rest.data(), rest.size(), stats);
}

int append(git_odb_writepack* base, const void* data, std::size_t size,
           git_indexer_progress* stats) {
  auto& w = writepack_of(base);
  if (w.handed_to != nullptr) return w.handed_to->append(w.handed_to, data, size, stats);
  const std::span bytes(static_cast<const unsigned char*>(data), size);
  try {
    try {
      w.pack->write(bytes);
    } catch (const std::system_error& e) {
      // libgit2 writes its own file, or fails as it would.
      return hand_over(w, bytes, stats, std::string("our copy of it: ") + e.what());
    }
    if (w.index.read(bytes) == PackIndexer::State::given_up)
      return hand_over(w, {}, stats, w.index.why_given_up());
    // The transport counts the bytes; a progress callback may cancel, as with libgit2's indexer.
    stats->total_objects = w.index.objects();
    stats->received_objects = w.index.objects_read();
    return w.progress != nullptr ? w.progress(stats, w.payload) : 0;
  } catch (const std::exception& e) {
    return failed(e);
  }
}

// The pack and its index under the name git gives them; the index last, as
// what makes the pack visible.
void keep(Writepack& w, const std::string& index) {
  git_oid checksum;
  std::memcpy(checksum.id, w.index.checksum().data(), GIT_OID_RAWSZ);
  const fs::path name = w.pack_dir / ("pack-" + oid_hex(checksum));
  PackDirFile index_file(w.pack_dir);
  index_file.write({reinterpret_cast<const unsigned char*>(index.data()), index.size()});
  const fs::path pack = fs::path(name).replace_extension(".pack");
  const bool had_pack = fs::exists(pack);
  w.pack->keep_as(pack);
  try {
    index_file.keep_as(fs::path(name).replace_extension(".idx"));
  } catch (const std::system_error&) {
    if (!had_pack) ::unlink(pack.c_str());  // no pack without its index
    throw;
  }
}

int commit(git_odb_writepack* base, git_indexer_progress* stats) {
  auto& w = writepack_of(base);
  try {
    if (w.handed_to == nullptr) {
      const auto read_back = [&w](std::uint64_t at, std::span<unsigned char> out) {
        w.pack->read_at(at, out);
      };
      const auto index = w.index.state() == PackIndexer::State::indexed &&
                                 w.index.resolve_deltas(read_back) == PackIndexer::State::indexed
                             ? w.index.index_file()
                             : std::nullopt;
      if (index) {
        keep(w, *index);
        stats->indexed_objects = stats->received_objects = w.index.objects();
        return w.next->refresh != nullptr ? w.next->refresh(w.next) : 0;
      }
      const auto why = w.index.state() == PackIndexer::State::given_up ? w.index.why_given_up()
                       : w.index.state() == PackIndexer::State::reading
                           ? std::string("the pack ended early")
                           : std::string("two objects of the pack have one id");
      if (const int rc = hand_over(w, {}, stats, why); rc < 0) return rc;
    }
    return w.handed_to->commit(w.handed_to, stats);
  } catch (const std::exception& e) {
    return failed(e);
  }
}

void free_writepack(git_odb_writepack* base) {
  const std::unique_ptr<WritepackHandle> handle(reinterpret_cast<WritepackHandle*>(base));
  const std::unique_ptr<Writepack> w(handle->writepack);
  if (w->handed_to != nullptr) w->handed_to->free(w->handed_to);
}

// The backend git_odb_write_pack() would use without ours: the first of
// higher priority that writes packs (the cache repo has no alternates).
git_odb_backend* next_writer(git_odb* odb) {
  for (std::size_t i = 0; i < git_odb_num_backends(odb); ++i) {
    git_odb_backend* backend = nullptr;
    if (git_odb_get_backend(&backend, odb, i) == 0 && backend->writepack != nullptr) return backend;
  }
  return nullptr;
}

// As WritepackHandle.
struct Backend {
  git_odb_backend base;
  git_odb_backend* next;
  const fs::path* pack_dir;  // owned
  PackHandovers* handovers;  // owned

  static int writepack(git_odb_writepack** out, git_odb_backend* base, git_odb* odb,
                       git_indexer_progress_cb progress, void* payload) {
    const auto& self = *reinterpret_cast<Backend*>(base);
    try {
      auto w = std::make_unique<Writepack>(self.next, *self.handovers, odb, progress, payload,
                                           *self.pack_dir);
      w->pack.emplace(*self.pack_dir);
      auto handle = std::make_unique<WritepackHandle>(
          WritepackHandle{{base, append, commit, free_writepack}, w.get()});
      w.release();
      *out = &handle.release()->base;
      return 0;
    } catch (const std::exception& e) {
      // No file of our own (or no memory for it): libgit2 writes the pack. Nothing may throw
      // out of this callback into libgit2's C, the record of why included.
      try {
        self.handovers->reasons.push_back(std::string("our copy of it: ") + e.what());
      } catch (...) {
      }
      return self.next->writepack(out, self.next, odb, progress, payload);
    }
  }

  static void free_backend(git_odb_backend* base) {
    const std::unique_ptr<Backend> self(reinterpret_cast<Backend*>(base));
    delete self->pack_dir;
    delete self->handovers;
  }
};
static_assert(std::is_standard_layout_v<Backend>);

}  // namespace

PackHandovers& add_pack_writer(git_repository* repo) {
  auto backend = std::make_unique<Backend>();
  git_check(git_odb_init_backend(&backend->base, GIT_ODB_BACKEND_VERSION),
            "set up the pack writer");
  backend->base.writepack = Backend::writepack;
  backend->base.free = Backend::free_backend;
  auto pack_dir =
      std::make_unique<const fs::path>(fs::path(git_repository_path(repo)) / "objects" / "pack");
  const OdbHandle odb = open_odb(repo);
  backend->next = next_writer(odb.get());
  if (backend->next == nullptr) throw GitError(Failure::cache, "no object backend writes packs");
  auto handovers = std::make_unique<PackHandovers>();
  backend->pack_dir = pack_dir.get();
  backend->handovers = handovers.get();
  git_check(git_odb_add_backend(odb.get(), &backend->base, kPriority),
            "add the pack writer to the object database");
  pack_dir.release();
  backend.release();
  return *handovers.release();
}

}  // namespace inflight::checkpoint
