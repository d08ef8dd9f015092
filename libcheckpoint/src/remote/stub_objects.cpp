// See stub_objects.hpp.
#include "remote/stub_objects.hpp"

#include <git2/sys/mempack.h>
#include <git2/sys/odb_backend.h>

#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "git/git_error.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"

namespace inflight::checkpoint {

namespace {

// A stub's tree is empty, but not git's empty tree: libgit2 takes a hidden commit's tree to be the
// server's, and would never send the empty tree that a new genesis names, which the server may
// lack. So it has an id that no real object has, that of a tree whose bytes are not a tree.
constexpr std::string_view kStubTreeBytes = "inflight: the tree of a stub";

// What libgit2 holds of each backend: a C struct that leads with it.
struct ForwardBackend {
  git_odb_backend backend;
  git_odb* cache;
};

// Plain fields only: libgit2 holds a pointer to `backend`, cast back to this.
struct StubBackend {
  git_odb_backend backend;
  const Stubs* stubs;
  git_oid tree;
  const std::string* commit;  // the bytes of each stub
};

git_odb* cache_of(git_odb_backend* backend) {
  return reinterpret_cast<ForwardBackend*>(backend)->cache;
}

const StubBackend& stub_of(git_odb_backend* backend) {
  return *reinterpret_cast<StubBackend*>(backend);
}

// `bytes`, copied where libgit2 frees what a backend read.
int give(void** data, std::size_t* size, git_odb_backend* backend, const void* bytes,
         std::size_t length) {
  *data = git_odb_backend_data_alloc(backend, length);
  if (*data == nullptr) return -1;
  std::memcpy(*data, bytes, length);
  *size = length;
  return 0;
}

int forward_read(void** data, std::size_t* size, git_object_t* type, git_odb_backend* backend,
                 const git_oid* oid) {
  git_odb_object* raw = nullptr;
  if (const int rc = git_odb_read(&raw, cache_of(backend), oid); rc < 0) return rc;
  const OdbObjectHandle object(raw);
  *type = git_odb_object_type(object.get());
  return give(data, size, backend, git_odb_object_data(object.get()),
              git_odb_object_size(object.get()));
}

int forward_read_header(std::size_t* size, git_object_t* type, git_odb_backend* backend,
                        const git_oid* oid) {
  return git_odb_read_header(size, type, cache_of(backend), oid);
}

int forward_exists(git_odb_backend* backend, const git_oid* oid) {
  return git_odb_exists(cache_of(backend), oid);
}

// What the stub backend answers for `oid`: the stub tree (empty), a stub, or nothing.
std::optional<std::pair<git_object_t, std::string_view>> stub_object(git_odb_backend* backend,
                                                                     const git_oid* oid) {
  const auto& stub = stub_of(backend);
  if (git_oid_equal(oid, &stub.tree)) return std::pair(GIT_OBJECT_TREE, std::string_view(""));
  const auto found = stub.stubs->find(*oid);
  if (found == stub.stubs->end()) return std::nullopt;
  return std::pair(GIT_OBJECT_COMMIT,
                   std::string_view(found->second.empty() ? *stub.commit : found->second));
}

int stub_read(void** data, std::size_t* size, git_object_t* type, git_odb_backend* backend,
              const git_oid* oid) {
  const auto object = stub_object(backend, oid);
  if (!object) return GIT_ENOTFOUND;
  *type = object->first;
  return give(data, size, backend, object->second.data(), object->second.size());
}

int stub_read_header(std::size_t* size, git_object_t* type, git_odb_backend* backend,
                     const git_oid* oid) {
  const auto object = stub_object(backend, oid);
  if (!object) return GIT_ENOTFOUND;
  *type = object->first;
  *size = object->second.size();
  return 0;
}

int stub_exists(git_odb_backend* backend, const git_oid* oid) {
  return stub_object(backend, oid) ? 1 : 0;
}

git_oid stub_tree() {
  git_oid tree;
  git_check(git_odb_hash(&tree, kStubTreeBytes.data(), kStubTreeBytes.size(), GIT_OBJECT_TREE),
            "make the push's objects");
  return tree;
}

// Adds `backend` to `odb`, which frees it from then on.
void add(git_odb* odb, git_odb_backend* backend, int priority) {
  if (const int rc = git_odb_add_backend(odb, backend, priority); rc < 0) {
    backend->free(backend);
    throw_git_error(rc, "make the push's objects");
  }
}

}  // namespace

std::string stub_reaching(const std::vector<std::string>& parents) {
  static const auto tree = oid_hex(stub_tree());
  return commit_bytes(tree, parents, 0, "a commit of the server's, not downloaded\n");
}

OdbHandle push_objects(git_odb* cache, const Stubs& stubs) {
  git_odb* raw = nullptr;
  git_check(git_odb_new(&raw), "make the push's objects");
  OdbHandle odb(raw);
  git_odb_backend* memory = nullptr;
  git_check(git_mempack_new(&memory), "make the push's objects");
  add(odb.get(), memory, 3);  // git_odb_write writes to the first backend that can
  auto* forward = new ForwardBackend{.backend = {}, .cache = cache};
  forward->backend.version = GIT_ODB_BACKEND_VERSION;
  forward->backend.read = forward_read;
  forward->backend.read_header = forward_read_header;
  forward->backend.exists = forward_exists;
  forward->backend.free = [](git_odb_backend* b) { delete reinterpret_cast<ForwardBackend*>(b); };
  add(odb.get(), &forward->backend, 2);  // a real object wins over its stub
  static const auto tree = stub_tree();
  static const auto commit = stub_reaching({});
  auto* stub = new StubBackend{.backend = {}, .stubs = &stubs, .tree = tree, .commit = &commit};
  stub->backend.version = GIT_ODB_BACKEND_VERSION;
  stub->backend.read = stub_read;
  stub->backend.read_header = stub_read_header;
  stub->backend.exists = stub_exists;
  stub->backend.free = [](git_odb_backend* b) { delete reinterpret_cast<StubBackend*>(b); };
  add(odb.get(), &stub->backend, 1);
  return odb;
}

}  // namespace inflight::checkpoint
