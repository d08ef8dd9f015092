// Rows padded into columns for a person to read. The operator commands print their tables with it,
// and so does the checkpoint agent when it renders `inflight runs list` (runs_list_output.hpp).
#pragma once

#include <string>
#include <vector>

namespace inflight {

// Each column as wide as its widest cell, two spaces apart, the last cell of a row unpadded; a
// line per row, the first row being the header.
std::string padded_table(const std::vector<std::vector<std::string>>& rows);

}  // namespace inflight
