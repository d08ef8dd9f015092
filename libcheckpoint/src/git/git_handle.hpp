// Move-only owners of libgit2 handles: each frees its handle with the
// matching *_free exactly once, so early returns and exceptions cannot leak.
#pragma once

#include <git2.h>

#include <memory>

namespace inflight::checkpoint {

template <typename T, void (*Free)(T*)>
struct GitFree {
  void operator()(T* handle) const { Free(handle); }
};

template <typename T, void (*Free)(T*)>
using GitHandle = std::unique_ptr<T, GitFree<T, Free>>;

using RepositoryHandle = GitHandle<git_repository, git_repository_free>;
using OdbHandle = GitHandle<git_odb, git_odb_free>;
using ObjectHandle = GitHandle<git_object, git_object_free>;
using BlobHandle = GitHandle<git_blob, git_blob_free>;
using TreeHandle = GitHandle<git_tree, git_tree_free>;
using TreeEntryHandle = GitHandle<git_tree_entry, git_tree_entry_free>;
using TreeBuilderHandle = GitHandle<git_treebuilder, git_treebuilder_free>;
using CommitHandle = GitHandle<git_commit, git_commit_free>;
using SignatureHandle = GitHandle<git_signature, git_signature_free>;
using ReferenceHandle = GitHandle<git_reference, git_reference_free>;
using ReferenceIteratorHandle = GitHandle<git_reference_iterator, git_reference_iterator_free>;
using RefdbHandle = GitHandle<git_refdb, git_refdb_free>;
using RemoteHandle = GitHandle<git_remote, git_remote_free>;
using OdbObjectHandle = GitHandle<git_odb_object, git_odb_object_free>;
using ConfigHandle = GitHandle<git_config, git_config_free>;
using RevwalkHandle = GitHandle<git_revwalk, git_revwalk_free>;
using PackbuilderHandle = GitHandle<git_packbuilder, git_packbuilder_free>;
// Owns what a git_buf on the stack holds, not the git_buf itself.
using BufContents = GitHandle<git_buf, git_buf_dispose>;

}  // namespace inflight::checkpoint
