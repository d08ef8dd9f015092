#include "remote/push_sources.hpp"

#include <fnmatch.h>
#include <git2/sys/refdb_backend.h>
#include <git2/sys/refs.h>
#include <git2/sys/repository.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"

namespace inflight::checkpoint {

namespace {

// `refs/heads/inflight/a/b` is sent from `refs/inflight-push/heads/inflight/a/b`.
constexpr std::string_view kPrefix = "refs/inflight-push/";

// What libgit2 holds: a C struct that leads with its backend.
struct MapRefdb {
  git_refdb_backend backend;
  const std::map<std::string, git_oid>* refs;
};

const std::map<std::string, git_oid>& refs_of(git_refdb_backend* backend) {
  return *reinterpret_cast<MapRefdb*>(backend)->refs;
}

int lookup(git_reference** out, git_refdb_backend* backend, const char* name) {
  const auto& refs = refs_of(backend);
  const auto found = refs.find(name);
  if (found == refs.end()) {
    git_error_set_str(GIT_ERROR_REFERENCE, (std::string("no push source ") + name).c_str());
    return GIT_ENOTFOUND;
  }
  *out = git_reference__alloc(name, &found->second, nullptr);
  return *out != nullptr ? 0 : -1;
}

// The sources matching a glob, as libgit2 lists refs (the pack builder
// looks for tags among them).
struct Listing {
  std::vector<std::pair<std::string, git_oid>> refs;
  std::size_t at = 0;
};

struct ListingIterator {
  git_reference_iterator iterator;
  Listing* listing;
};

Listing& listing_of(git_reference_iterator* iterator) {
  return *reinterpret_cast<ListingIterator*>(iterator)->listing;
}

int next_name(const char** out, git_reference_iterator* iterator) {
  Listing& listing = listing_of(iterator);
  if (listing.at == listing.refs.size()) return GIT_ITEROVER;
  *out = listing.refs[listing.at++].first.c_str();
  return 0;
}

int next_ref(git_reference** out, git_reference_iterator* iterator) {
  Listing& listing = listing_of(iterator);
  if (listing.at == listing.refs.size()) return GIT_ITEROVER;
  const auto& [name, oid] = listing.refs[listing.at++];
  *out = git_reference__alloc(name.c_str(), &oid, nullptr);
  return *out != nullptr ? 0 : -1;
}

int list(git_reference_iterator** out, git_refdb_backend* backend, const char* glob) {
  auto listing = std::make_unique<Listing>();
  for (const auto& [name, oid] : refs_of(backend))
    if (glob == nullptr || ::fnmatch(glob, name.c_str(), 0) == 0)
      listing->refs.emplace_back(name, oid);
  auto* shell =
      new ListingIterator{.iterator = {.db = nullptr,
                                       .next = next_ref,
                                       .next_name = next_name,
                                       .free =
                                           [](git_reference_iterator* iterator) {
                                             delete &listing_of(iterator);
                                             delete reinterpret_cast<ListingIterator*>(iterator);
                                           }},
                          .listing = listing.release()};
  *out = &shell->iterator;
  return 0;
}

int exists(int* out, git_refdb_backend* backend, const char* name) {
  *out = refs_of(backend).count(name) != 0;
  return 0;
}

// A push reads its sources only; anything else is a bug to report, not to
// write to the cache.
constexpr auto read_only = [](auto...) {
  git_error_set_str(GIT_ERROR_REFERENCE, "push sources are read-only");
  return -1;
};

git_refdb_backend* map_refdb(const std::map<std::string, git_oid>& refs) {
  auto* refdb = new MapRefdb{
      .backend = {.version = GIT_REFDB_BACKEND_VERSION,
                  .exists = exists,
                  .lookup = lookup,
                  .iterator = list,
                  .write = read_only,
                  .rename = read_only,
                  .del = read_only,
                  .compress = read_only,
                  .has_log = read_only,
                  .ensure_log = read_only,
                  .free = [](git_refdb_backend* b) { delete reinterpret_cast<MapRefdb*>(b); },
                  .reflog_read = read_only,
                  .reflog_write = read_only,
                  .reflog_rename = read_only,
                  .reflog_delete = read_only,
                  .lock = read_only,
                  .unlock = read_only},
      .refs = &refs};
  return &refdb->backend;
}

}  // namespace

PushSources::PushSources(CacheRepo& cache)
    : cache_objects_(open_odb(raw_repo(cache))),  // with the objects held in memory
      repo_(open_bare(cache.path())) {
  git_repository* raw = repo_.get();
  git_check(git_repository_set_odb(raw, cache_objects_.get()), "share the cache's objects");
  git_refdb* refdb = nullptr;
  git_check(git_refdb_new(&refdb, raw), "create the push sources");
  const RefdbHandle owned(refdb);
  git_refdb_backend* backend = map_refdb(refs_);
  if (const int rc = git_refdb_set_backend(refdb, backend); rc < 0) {
    backend->free(backend);
    throw_git_error(rc, "create the push sources");
  }
  git_check(git_repository_set_refdb(raw, refdb), "use the push sources");
}

void PushSources::use_own_objects() {
  if (own_objects_) return;
  const OdbHandle objects = push_objects(cache_objects_.get(), stubs_);
  git_check(git_repository_set_odb(repo_.get(), objects.get()), "use the push's own objects");
  own_objects_ = true;
}

void PushSources::stub(const git_oid& commit) {
  use_own_objects();
  stubs_.try_emplace(commit);
}

void PushSources::stub(const git_oid& commit, const std::vector<std::string>& parents) {
  use_own_objects();
  // libgit2 reads at most 2^16 parents of a commit: more are reached through stubs of groups of
  // them, with ids that no real object has.
  constexpr std::size_t kParentsPerStub = 1000;
  std::vector<std::string> reached = parents;
  for (int level = 0; reached.size() > kParentsPerStub; ++level) {
    std::vector<std::string> groups;
    for (std::size_t first = 0; first < reached.size(); first += kParentsPerStub) {
      const auto end = std::min(reached.size(), first + kParentsPerStub);
      const std::string name = "inflight: the stubs of group " + std::to_string(level) + "/" +
                               std::to_string(first) + " under " + oid_hex(commit);
      git_oid group;
      git_check(git_odb_hash(&group, name.data(), name.size(), GIT_OBJECT_COMMIT),
                "make the push's objects");
      stubs_.insert_or_assign(group, stub_reaching({reached.begin() + static_cast<long>(first),
                                                    reached.begin() + static_cast<long>(end)}));
      groups.push_back(oid_hex(group));
    }
    reached = std::move(groups);
  }
  stubs_.insert_or_assign(commit, stub_reaching(reached));
}

std::string PushSources::add(const std::string& ref, const git_oid& commit) {
  std::string name = std::string(kPrefix) + ref.substr(ref.find('/') + 1);
  refs_.insert_or_assign(name, commit);
  return name;
}

}  // namespace inflight::checkpoint
