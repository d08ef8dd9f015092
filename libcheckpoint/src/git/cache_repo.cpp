// The cache repo: disposable, so anything that is not a repository where it
// should be is replaced. It appears whole or not at all (made aside, then
// renamed into place), so an agent killed while creating it leaves nothing
// that wedges the next one. New objects live in memory until persist(), so a
// snapshot is hashed once and compressed once, by the push that sends it.
#include <git2.h>
#include <git2/sys/mempack.h>
#include <git2/sys/odb_backend.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>

#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/oid_text.hpp"
#include "git/pack_writer.hpp"
#include "git/packed_refs.hpp"
#include "git/repo_objects.hpp"
#include "inflight/checkpoint/git_store.hpp"
#include "inflight/core/run_dir.hpp"

namespace inflight::checkpoint {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void cache_failure(const fs::path& path, const std::string& what,
                                const std::string& why) {
  throw GitError(Failure::cache, "repository " + path.string() + ": " + what + ": " + why);
}

// A name of this process's own beside `path`.
fs::path beside(const fs::path& path, const char* what) {
  return path.parent_path() /
         (path.filename().string() + "." + what + "-" + std::to_string(getpid()));
}

// Moves whatever is at `path` out of the way and deletes it; another agent
// doing the same at once is not an error.
void discard(const fs::path& path) {
  const auto doomed = beside(path, "broken");
  std::error_code ec;
  fs::rename(path, doomed, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    cache_failure(path, "move aside", ec.message());
  fs::remove_all(doomed, ec);
}

// Another agent may create it at the same time: the first rename wins and
// the others use its repository.
void create(const fs::path& path) {
  const auto fresh = beside(path, "new");
  std::error_code ec;
  fs::remove_all(fresh, ec);
  fs::create_directories(path.parent_path(), ec);
  if (ec) cache_failure(path, "create parent", ec.message());
  git_repository* raw = nullptr;
  const int rc = git_repository_init(&raw, fresh.c_str(), /*is_bare=*/1);
  git_repository_free(raw);
  if (rc != 0) {
    fs::remove_all(fresh, ec);
    throw_git_error(rc, "create repository " + fresh.string());
  }
  fs::rename(fresh, path, ec);
  if (ec) fs::remove_all(fresh, ec);
}

}  // namespace

RepositoryHandle open_or_init_bare(const fs::path& path) {
  git_repository* raw = nullptr;
  if (git_repository_open_bare(&raw, path.c_str()) == 0) return RepositoryHandle(raw);
  git_error_clear();
  std::error_code ec;
  if (fs::symlink_status(path, ec).type() != fs::file_type::not_found) discard(path);
  create(path);
  return open_bare(path);
}

RepositoryHandle open_bare(const fs::path& path) {
  git_repository* raw = nullptr;
  git_check(git_repository_open_bare(&raw, path.c_str()), "open repository " + path.string());
  return RepositoryHandle(raw);
}

namespace {

// Checkpoint objects are mostly unique chunks and run files, so a delta
// search costs a push more time than the bytes it saves. The pack builder
// skips objects above its big-file threshold, which libgit2 1.5 reads from
// pack.deltaCacheSize (git itself reads pack.bigFileThreshold): set both.
void skip_delta_search(git_repository* repo) {
  git_config* raw = nullptr;
  if (git_repository_config(&raw, repo) != 0) return git_error_clear();
  const ConfigHandle config(raw);
  std::int64_t value = 0;
  if (git_config_get_int64(&value, raw, "pack.deltaCacheSize") == 0) return;
  // Another agent may be writing the same setting: either write will do.
  if (git_config_set_int64(raw, "pack.deltaCacheSize", 1) != 0 ||
      git_config_set_int64(raw, "pack.bigFileThreshold", 1) != 0)
    git_error_clear();
}

// Every object written from now on is held in memory, ahead of the disk's
// loose and packed objects, which stay readable.
git_odb_backend* hold_new_objects_in_memory(git_repository* repo) {
  git_odb_backend* memory = nullptr;
  git_check(git_mempack_new(&memory), "create the in-memory object store");
  const OdbHandle odb = open_odb(repo);
  if (const int rc = git_odb_add_backend(odb.get(), memory, /*priority=*/999); rc < 0) {
    memory->free(memory);
    throw_git_error(rc, "add the in-memory object store");
  }
  return memory;
}

struct WritepackFree {
  void operator()(git_odb_writepack* writer) const { writer->free(writer); }
};

bool has_commit(const std::vector<git_oid>& commits, const git_oid& oid) {
  return std::any_of(commits.begin(), commits.end(),
                     [&oid](const git_oid& c) { return git_oid_equal(&c, &oid); });
}

// The objects that `commits` brought, without what their parents outside
// the set reach: git_mempack_dump() would pack each commit's whole tree again.
void pack_new_objects(git_buf& pack, git_repository* repo, const std::vector<git_oid>& commits) {
  git_revwalk* raw_walk = nullptr;
  git_check(git_revwalk_new(&raw_walk, repo), "walk new commits");
  const RevwalkHandle walk(raw_walk);
  for (const auto& oid : commits) {
    git_check(git_revwalk_push(walk.get(), &oid), "walk new commits");
    const CommitHandle commit = lookup_commit(repo, oid);
    for (unsigned n = 0; n < git_commit_parentcount(commit.get()); ++n)
      if (const git_oid* parent = git_commit_parent_id(commit.get(), n);
          !has_commit(commits, *parent))
        git_check(git_revwalk_hide(walk.get(), parent), "walk new commits");
  }
  git_packbuilder* raw_builder = nullptr;
  git_check(git_packbuilder_new(&raw_builder, repo), "pack new objects");
  const PackbuilderHandle builder(raw_builder);
  git_check(git_packbuilder_insert_walk(builder.get(), walk.get()), "pack new objects");
  git_check(git_packbuilder_write_buf(&pack, builder.get()), "pack new objects");
}

// Indexes `pack` into the repository's objects/pack, as a fetch would.
void write_pack(git_repository* repo, const git_buf& pack) {
  const OdbHandle odb = open_odb(repo);
  git_odb_writepack* raw = nullptr;
  git_check(git_odb_write_pack(&raw, odb.get(), nullptr, nullptr), "start a pack");
  const std::unique_ptr<git_odb_writepack, WritepackFree> writer(raw);
  git_indexer_progress progress{};
  git_check(writer->append(writer.get(), pack.ptr, pack.size, &progress), "write the pack");
  git_check(writer->commit(writer.get(), &progress), "index the pack");
}

}  // namespace

CacheRepo::CacheRepo(const fs::path& path) {
  try {
    auto repo = open_or_init_bare(path);
    git_odb_backend* memory = hold_new_objects_in_memory(repo.get());
    PackHandovers& handovers = add_pack_writer(repo.get());
    impl_ = std::make_unique<Impl>(Impl{.path = path,
                                        .repo = std::move(repo),
                                        .memory = memory,
                                        .new_commits = {},
                                        .pending_refs = {},
                                        .handovers = &handovers});
  } catch (const GitError& e) {
    if (e.kind() == Failure::cache) throw;
    throw GitError(Failure::cache, e.what());
  }
  skip_delta_search(impl_->repo.get());
}

void CacheRepo::remember_pushed(const std::string& ref, const std::string& commit) {
  impl_->pending_refs.emplace_back(ref, parse_oid(commit));
}

void CacheRepo::keep_pushed() {
  // A record waits for persist() when its commit, or an earlier record of
  // its ref, still does: one ref's records keep their order.
  std::vector<std::pair<std::string, git_oid>> now, later;
  for (auto& record : impl_->pending_refs) {
    const bool waits = has_commit(impl_->new_commits, record.second) ||
                       std::any_of(later.begin(), later.end(), [&](const auto& waiting) {
                         return waiting.first == record.first;
                       });
    (waits ? later : now).push_back(std::move(record));
  }
  impl_->pending_refs = std::move(later);
  try {
    pack_refs(impl_->path, now, kLocalPrefix);
  } catch (const GitError&) {
    impl_->pending_refs.insert(impl_->pending_refs.begin(), now.begin(), now.end());
    throw;
  }
}

void CacheRepo::forget_pushed(const std::string& ref) {
  impl_->pending_refs.emplace_back(ref, git_oid{});
}

std::optional<std::string> CacheRepo::pushed_tip(const std::string& ref) {
  const auto& pending = impl_->pending_refs;
  for (auto it = pending.rbegin(); it != pending.rend(); ++it)
    if (it->first == ref)
      return git_oid_is_zero(&it->second) ? std::nullopt : std::optional(oid_hex(it->second));
  git_oid oid;
  if (git_reference_name_to_id(&oid, impl_->repo.get(), ref.c_str()) != 0) {
    git_error_clear();
    return std::nullopt;
  }
  return oid_hex(oid);
}

std::map<std::string, std::string> CacheRepo::pushed_under(const std::string& prefix) {
  std::map<std::string, std::string> records;
  git_reference_iterator* raw = nullptr;
  git_check(git_reference_iterator_glob_new(&raw, impl_->repo.get(), (prefix + "*").c_str()),
            "list the records under " + prefix);
  const ReferenceIteratorHandle iterator(raw);
  git_reference* ref = nullptr;
  int rc = 0;
  while ((rc = git_reference_next(&ref, iterator.get())) == 0) {
    const ReferenceHandle held(ref);
    if (const git_oid* oid = git_reference_target(held.get()))
      records.insert_or_assign(git_reference_name(held.get()), oid_hex(*oid));
  }
  if (rc != GIT_ITEROVER) git_check(rc, "list the records under " + prefix);
  git_error_clear();
  for (const auto& [name, oid] : impl_->pending_refs) {
    if (!name.starts_with(prefix)) continue;
    if (git_oid_is_zero(&oid))
      records.erase(name);
    else
      records.insert_or_assign(name, oid_hex(oid));
  }
  return records;
}

void CacheRepo::persist() {
  if (impl_->new_commits.empty()) return keep_pushed();
  git_buf pack = GIT_BUF_INIT;
  const BufContents owned(&pack);
  try {
    pack_new_objects(pack, impl_->repo.get(), impl_->new_commits);
    write_pack(impl_->repo.get(), pack);
  } catch (const GitError& e) {
    cache_failure(impl_->path, "cannot keep new objects", e.what());
  }
  git_mempack_reset(impl_->memory);
  impl_->new_commits.clear();
  keep_pushed();
}

std::vector<std::string> CacheRepo::take_pack_handovers() {
  return std::exchange(impl_->handovers->reasons, {});
}

bool CacheRepo::contains(const std::string& oid) {
  git_oid id;
  if (git_oid_fromstrn(&id, oid.data(), oid.size()) < 0) {
    git_error_clear();
    return false;
  }
  return git_odb_exists(open_odb(impl_->repo.get()).get(), &id) == 1;
}

void CacheRepo::check_writable() {
  const auto probe = beside(impl_->path, "probe");
  try {
    write_file_atomically(probe, "inflight: can this disk hold a checkpoint?\n",
                          Durability::atomic);
  } catch (const std::exception& e) {
    cache_failure(impl_->path, "cannot write", e.what());
  }
  std::error_code ec;
  fs::remove(probe, ec);
}

CacheRepo::~CacheRepo() = default;
CacheRepo::CacheRepo(CacheRepo&&) noexcept = default;
CacheRepo& CacheRepo::operator=(CacheRepo&&) noexcept = default;

const fs::path& CacheRepo::path() const {
  return impl_->path;
}
CacheRepo::Impl& CacheRepo::impl() {
  return *impl_;
}

}  // namespace inflight::checkpoint
