// `inflight runs list`'s output, written field by field (runs_list_output.hpp): building a json
// value of 100,000 rows first cost more than writing them.
#include "inflight/checkpoint/runs_list_output.hpp"

#include <optional>

#include "inflight/core/bounded_json.hpp"
#include "inflight/core/text_table.hpp"

namespace inflight::checkpoint {

namespace {

constexpr std::string_view kFieldIndent = "      ";

void field_name(std::string& out, std::string_view name) {
  out += kFieldIndent;
  out += '"';
  out += name;
  out += "\": ";
}

void text_field(std::string& out, std::string_view name, std::string_view value) {
  field_name(out, name);
  append_json_string(out, value);
  out += ",\n";
}

void optional_text_field(std::string& out, std::string_view name,
                         const std::optional<std::string>& value) {
  if (value) return text_field(out, name, *value);
  field_name(out, name);
  out += "null,\n";
}

void count_field(std::string& out, std::string_view name, std::uint64_t value) {
  field_name(out, name);
  out += std::to_string(value);
  out += ",\n";
}

void append_row(std::string& out, const RunRow& run) {
  out += "    {\n";
  text_field(out, "id", run.id);
  text_field(out, "state", run.state);
  text_field(out, "pod", run.pod);
  count_field(out, "attempts", run.attempts);
  count_field(out, "interruptions", run.interruptions);
  count_field(out, "failures", run.failures);
  count_field(out, "records", run.records);
  if (run.total) {
    count_field(out, "total", *run.total);
  } else {
    field_name(out, "total");
    out += "null,\n";
  }
  optional_text_field(out, "last_checkpoint_at", run.last_checkpoint_at);
  optional_text_field(out, "finished_at", run.finished_at);
  field_name(out, "where");
  append_json_string(out, run.where);
  out += "\n    }";
}

std::string json_of(const std::vector<const RunRow*>& rows) {
  if (rows.empty()) return "{\n  \"runs\": []\n}\n";
  std::string out = "{\n  \"runs\": [\n";
  for (const auto* run : rows) {
    append_row(out, *run);
    out += run == rows.back() ? "\n" : ",\n";
  }
  return out + "  ]\n}\n";
}

std::string records_text(const RunRow& run) {
  auto text = std::to_string(run.records);
  if (run.total) text.append("/").append(std::to_string(*run.total));
  return text;
}

std::string table_of(const std::vector<const RunRow*>& rows, std::string_view state,
                     std::string_view url) {
  if (rows.empty()) {
    std::string text = "no runs";
    if (!state.empty()) text.append(" ").append(state);
    return text.append(" on ").append(url).append("\n");
  }
  std::vector<std::vector<std::string>> table{{"RUN ID", "STATE", "POD", "ATTEMPTS",
                                               "INTERRUPTIONS", "FAILURES", "RECORDS",
                                               "LAST CHECKPOINT", "FINISHED"}};
  for (const auto* r : rows)
    table.push_back({r->id, r->state, r->pod, std::to_string(r->attempts),
                     std::to_string(r->interruptions), std::to_string(r->failures),
                     records_text(*r), r->last_checkpoint_at.value_or("-"),
                     r->finished_at.value_or("-")});
  return padded_table(table);
}

}  // namespace

std::string render_runs(const std::vector<RunRow>& runs, ListingFormat format,
                        std::string_view state, std::string_view url) {
  std::vector<const RunRow*> rows;
  rows.reserve(runs.size());
  for (const auto& run : runs)
    if (state.empty() || run.state == state) rows.push_back(&run);
  return format == ListingFormat::json ? json_of(rows) : table_of(rows, state, url);
}

}  // namespace inflight::checkpoint
