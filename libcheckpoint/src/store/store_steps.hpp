// The steps CheckpointStore takes in more than one file: a publication
// (publish.cpp) and where the release steps of finished runs sit in a
// periodic push (release_steps.cpp, made by checkpoint_store.cpp).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "inflight/checkpoint/checkpoint_store.hpp"
#include "store/archive_fold.hpp"
#include "store/index_commit.hpp"

namespace inflight::checkpoint {

// A run to publish: its result commit and its index entry.
struct CheckpointStore::Publication {
  std::string run_id;
  std::string result;
  RunEntry entry;
  bool result_landed = false;
  std::optional<Error> failure;  // it stops here: another pod published the run id first
};

struct CheckpointStore::ReleaseFinal {
  std::optional<std::size_t> branch = std::nullopt;  // none: its final state was pushed before
  std::optional<std::size_t> result = std::nullopt;  // none: not published (--publish off, …)
  std::string run_id = {};
  std::optional<IndexEntry> entry = std::nullopt;  // with the result
};

// The fold a push carries (archive_fold.hpp), and the runs it folds.
struct CheckpointStore::FoldPush {
  std::optional<std::size_t> at = std::nullopt;
  std::vector<ArchivedRun> runs = {};
  bool alone = false;  // a push of its own: a refusal is the archive's, not another ref's
};

struct CheckpointStore::ReleasePush {
  std::vector<ReleaseFinal> finals = {};
  std::optional<std::size_t> index = std::nullopt;
  IndexTarget target = {};  // where the index update went, and on which tip
  std::vector<std::size_t> deletions = {};
  // The run id and result of each entry of a result that landed before (ReleaseSteps::indexed).
  std::vector<std::pair<std::string, std::string>> indexed = {};
};

}  // namespace inflight::checkpoint
