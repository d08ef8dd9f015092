// One file of the `inflight-index` branch, `runs/<run-id>.json` (docs/results.md "The result and
// the index"), and one line of layout 2's index (docs/design/history-layout.md §3.2): what a
// listing shows of a published run without downloading its result. Written here and read here only.
// A file read from the branch is data that anyone with push access wrote: every field is checked,
// and a bad file is refused whole, naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "inflight/core/failure.hpp"
#include "inflight/core/run_params.hpp"

namespace inflight::checkpoint {

struct IndexAttempt {
  std::string pod;
  std::optional<std::string> outcome;
  std::string started;
  std::optional<std::string> ended;
};

struct IndexEntry {
  std::string id;
  std::string final_status;
  std::string pod;  // of the last attempt, or the origin pod when none ran
  std::vector<IndexAttempt> attempts;
  std::uint64_t records = 0;
  std::optional<std::uint64_t> total;
  std::string created_at;
  std::optional<std::string> finished_at;
  std::string result;  // refs/inflight-results/<run-id>
  // Its model calls over every attempt (SPEC §13 "Accounting"), when it had models.
  std::optional<ModelCounts> model = std::nullopt;
  // The result commit's id, 40 lower-case hex digits: what `runs show` fetches and the archive
  // keeps once the result ref is gone. Layout 1's files have none.
  std::optional<std::string> result_commit = std::nullopt;
};

// An index file is small: its attempts are bounded like run-params.json's.
inline constexpr std::size_t kMaxIndexEntryBytes = 256 * 1024;

// The entry of a finished run (`params.final_status` set).
IndexEntry index_entry_of(const RunParams& params, std::uint64_t records,
                          std::optional<std::uint64_t> total);
// The entry of a published run of which only how it ended is known (its status marker).
IndexEntry entry_of_status(std::string_view run_id, std::string final_status);
std::string write_index_entry(const IndexEntry& entry);
// The entry `text` holds, or an Error naming what is wrong with it.
Result<IndexEntry> parse_index_entry(std::string_view text);

// Layout 2 keeps entries as lines, one compact JSON object each: a snapshot's segments hold
// entries, and a log delta holds entries and removals (`{"id":…,"removed":true}`) too. A later line
// of an id replaces an earlier one.
struct IndexLine {
  std::string id;
  std::optional<IndexEntry> entry;  // none: the run's entry is removed
};
std::string write_index_line(const IndexEntry& entry);
// Throws std::invalid_argument for an id that is not a run id.
std::string write_removal_line(std::string_view run_id);
enum class Removals { refused, allowed };
// One line, with or without its newline; a removal only where `removals` allows one.
Result<IndexLine> parse_index_line(std::string_view line, Removals removals);

}  // namespace inflight::checkpoint
