// What `inflight runs list` prints (docs/results.md "Every run of the fleet: `inflight runs`"),
// rendered by the checkpoint agent, which holds the rows, into a file the command prints: at
// 100,000 runs, rows sent over the pipe as JSON cost a parse and a print on each side, more
// than the listing itself (docs/benchmarks.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "inflight/checkpoint/store_types.hpp"

namespace inflight::checkpoint {

enum class ListingFormat { table, json };

// The rows of `runs` whose state is `state` (every row when empty), as `{"runs": [ … ]}` laid out
// two spaces an indent level, or as a table for a person; a table of no row says so, naming
// `url`. Ends in a newline.
std::string render_runs(const std::vector<RunRow>& runs, ListingFormat format,
                        std::string_view state, std::string_view url);

}  // namespace inflight::checkpoint
