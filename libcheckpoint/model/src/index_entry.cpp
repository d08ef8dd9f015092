#include "inflight/checkpoint/index_entry.hpp"

#include <stdexcept>

#include "inflight/core/bounded_json.hpp"
#include "inflight/core/branch_name.hpp"

namespace inflight::checkpoint {

namespace {

// Timestamps, pod names, outcomes: short by nature.
constexpr std::size_t kMaxShortString = 256;

template <typename T>
OrderedJson optional_json(const std::optional<T>& value) {
  return value ? OrderedJson(*value) : OrderedJson(nullptr);
}

// The reader's view of one JSON object: each field checked, the first
// problem kept with its name.
class Fields {
 public:
  explicit Fields(const OrderedJson& json) : json_(json) {}

  std::string text(const char* key) {
    auto value = optional_text(key);
    if (!value && !problem_) problem_ = std::string(key) + " is missing";
    return value.value_or("");
  }
  std::optional<std::string> optional_text(const char* key) {
    const auto it = json_.find(key);
    if (it == json_.end() || it->is_null()) return std::nullopt;
    if (!it->is_string() || it->get_ref<const std::string&>().size() > kMaxShortString) {
      fail(key, "is not a string of at most " + std::to_string(kMaxShortString) + " bytes");
      return std::nullopt;
    }
    return it->get<std::string>();
  }
  std::optional<std::uint64_t> optional_count(const char* key) {
    const auto it = json_.find(key);
    if (it == json_.end() || it->is_null()) return std::nullopt;
    if (!it->is_number_unsigned()) {
      fail(key, "is not a whole number");
      return std::nullopt;
    }
    return it->get<std::uint64_t>();
  }
  void fail(const std::string& key, const std::string& why) {
    if (!problem_) problem_ = key + " " + why;
  }
  const std::optional<std::string>& problem() const { return problem_; }

 private:
  const OrderedJson& json_;
  std::optional<std::string> problem_;
};

std::vector<IndexAttempt> read_attempts(const OrderedJson& json, Fields& fields) {
  std::vector<IndexAttempt> attempts;
  const auto it = json.find("attempts");
  if (it == json.end() || !it->is_array() || it->size() > kMaxAttemptRecords) {
    fields.fail("attempts", "is not a list of at most " + std::to_string(kMaxAttemptRecords));
    return attempts;
  }
  for (const auto& item : *it) {
    if (!item.is_object()) {
      fields.fail("attempts", "holds something that is not an object");
      break;
    }
    Fields attempt(item);
    attempts.push_back({.pod = attempt.text("pod"),
                        .outcome = attempt.optional_text("outcome"),
                        .started = attempt.text("started"),
                        .ended = attempt.optional_text("ended")});
    if (attempt.problem()) fields.fail("attempts", *attempt.problem());
  }
  return attempts;
}

}  // namespace

IndexEntry index_entry_of(const RunParams& params, std::uint64_t records,
                          std::optional<std::uint64_t> total) {
  IndexEntry entry{.id = params.run_id,
                   .final_status = params.final_status.value_or(""),
                   .pod = params.attempts.empty() ? params.origin_pod : params.attempts.back().pod,
                   .attempts = {},
                   .records = records,
                   .total = total,
                   .created_at = params.created_at,
                   .finished_at = std::nullopt,
                   .result = result_ref(params.run_id)};
  for (const auto& a : params.attempts)
    entry.attempts.push_back(
        {.pod = a.pod, .outcome = a.outcome, .started = a.started_at, .ended = a.ended_at});
  if (!params.attempts.empty()) entry.finished_at = params.attempts.back().ended_at;
  entry.model = model_counts(params.attempts);
  return entry;
}

namespace {

OrderedJson entry_json(const IndexEntry& entry) {
  OrderedJson attempts = OrderedJson::array();
  for (const auto& a : entry.attempts)
    attempts.push_back({{"pod", a.pod},
                        {"outcome", optional_json(a.outcome)},
                        {"started", a.started},
                        {"ended", optional_json(a.ended)}});
  OrderedJson json{{"id", entry.id},
                   {"final_status", entry.final_status},
                   {"pod", entry.pod},
                   {"attempts", attempts},
                   {"records", entry.records},
                   {"total", optional_json(entry.total)},
                   {"created_at", entry.created_at},
                   {"finished_at", optional_json(entry.finished_at)},
                   {"result", entry.result}};
  if (entry.model) json["model"] = to_json(*entry.model);
  if (entry.result_commit) json["result_commit"] = *entry.result_commit;
  return json;
}

bool is_commit_id(std::string_view text) {
  return text.size() == 40 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

Result<IndexEntry> entry_of_json(const OrderedJson& json) {
  Fields fields(json);
  IndexEntry entry{.id = fields.text("id"),
                   .final_status = fields.text("final_status"),
                   .pod = fields.text("pod"),
                   .attempts = read_attempts(json, fields),
                   .records = fields.optional_count("records").value_or(0),
                   .total = fields.optional_count("total"),
                   .created_at = fields.text("created_at"),
                   .finished_at = fields.optional_text("finished_at"),
                   .result = fields.text("result"),
                   .result_commit = fields.optional_text("result_commit")};
  if (!fields.problem() && !is_valid_run_id(entry.id)) fields.fail("id", "is not a run id");
  if (!fields.problem() && entry.result != result_ref(entry.id))
    fields.fail("result", "is not " + result_ref(entry.id));
  if (!fields.problem() && entry.result_commit && !is_commit_id(*entry.result_commit))
    fields.fail("result_commit", "is not 40 lower-case hex digits");
  if (fields.problem()) return Error{Failure::other, "index entry: " + *fields.problem(), {}};
  if (const auto model = json.find("model"); model != json.end() && !model->is_null()) {
    try {
      entry.model = model_counts_from_json(*model);
    } catch (const std::runtime_error& e) {
      return Error{Failure::other, std::string("index entry: ") + e.what(), {}};
    }
  }
  return entry;
}

Error line_error(const std::string& why) {
  return {Failure::other, "index line: " + why, {}};
}

// A removal names its run and nothing else.
Result<IndexLine> removal_of_json(const OrderedJson& json) {
  const auto id = json.find("id");
  if (json.size() != 2 || json.at("removed") != true || id == json.end() || !id->is_string() ||
      !is_valid_run_id(id->get_ref<const std::string&>()))
    return line_error("a removal is not {\"id\": <run id>, \"removed\": true}");
  return IndexLine{.id = id->get<std::string>(), .entry = std::nullopt};
}

}  // namespace

IndexEntry entry_of_status(std::string_view run_id, std::string final_status) {
  IndexEntry entry;
  entry.id = std::string(run_id);
  entry.final_status = std::move(final_status);
  entry.result = result_ref(run_id);
  return entry;
}

std::string write_index_entry(const IndexEntry& entry) {
  return entry_json(entry).dump(2) + "\n";
}

Result<IndexEntry> parse_index_entry(std::string_view text) {
  auto json = parse_bounded_json(text, {.max_bytes = kMaxIndexEntryBytes, .max_depth = 8});
  if (!json) return json.error();
  if (!json->is_object()) return Error{Failure::other, "an index entry is not an object", {}};
  return entry_of_json(*json);
}

std::string write_index_line(const IndexEntry& entry) {
  return entry_json(entry).dump() + "\n";
}

std::string write_removal_line(std::string_view run_id) {
  if (!is_valid_run_id(run_id))
    throw std::invalid_argument("no removal line for '" + printable(run_id) + "': not a run id");
  return OrderedJson{{"id", run_id}, {"removed", true}}.dump() + "\n";
}

Result<IndexLine> parse_index_line(std::string_view line, Removals removals) {
  if (line.ends_with('\n')) line.remove_suffix(1);
  if (line.find('\n') != std::string_view::npos) return line_error("holds a newline");
  auto json = parse_bounded_json(line, {.max_bytes = kMaxIndexEntryBytes, .max_depth = 8});
  if (!json) return line_error(json.error().message);
  if (!json->is_object()) return line_error("is not an object");
  if (json->contains("removed")) {
    if (removals == Removals::refused) return line_error("a removal where none is allowed");
    return removal_of_json(*json);
  }
  auto entry = entry_of_json(*json);
  if (!entry) return entry.error();
  auto id = entry->id;
  return IndexLine{.id = std::move(id), .entry = std::move(*entry)};
}

}  // namespace inflight::checkpoint
