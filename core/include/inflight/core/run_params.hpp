// run-params.json (docs/serve.md "Runs and attempts"): what a run is, kept in its run dir and
// carried in every checkpoint, so any instance can run its next attempt.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "inflight/core/run_dir.hpp"

namespace inflight::checkpoint {

using OrderedJson = nlohmann::ordered_json;

// The template a run uses when its request names none: the config file's
// `child`, or the built-in demo.
inline constexpr std::string_view kDefaultTemplate = "default";

// What an attempt's model calls cost and saved (SPEC §13 "Accounting"):
// tokens as the providers' usage reported them.
struct ModelCounts {
  std::uint64_t calls = 0;     // answered, from the upstream or the journal
  std::uint64_t replayed = 0;  // of them, from the journal
  std::uint64_t input_tokens = 0;
  std::uint64_t output_tokens = 0;
  std::uint64_t saved_input_tokens = 0;  // of the replayed answers
  std::uint64_t saved_output_tokens = 0;

  ModelCounts& operator+=(const ModelCounts& other);
};

OrderedJson to_json(const ModelCounts& counts);
// Throws std::runtime_error naming the field that is not a whole number.
ModelCounts model_counts_from_json(const OrderedJson& json);

struct AttemptRecord {
  int attempt = 0;
  std::string pod;
  std::string started_at;
  std::optional<std::string> ended_at{};
  std::optional<int> exit_code{};
  std::optional<int> signal{};
  std::optional<std::string> outcome{};  // unset while the attempt runs
  // Why the attempt ended without running, such as a child that could not be
  // started; written only when set. At most kMaxAttemptErrorBytes.
  std::optional<std::string> error{};
  // Its model calls, when the instance had models.
  std::optional<ModelCounts> model{};
};

// The model calls of every attempt, summed; nullopt when none had models.
std::optional<ModelCounts> model_counts(const std::vector<AttemptRecord>& attempts);

struct RunParams {
  std::string run_id;
  OrderedJson request = OrderedJson::object();
  // The template the latest attempt ran with, for inspection only: every
  // attempt renders the configured template named `child_name`.
  std::string child_name{kDefaultTemplate};
  std::string child_digest;
  OrderedJson child = OrderedJson::object();
  std::vector<std::string> argv;
  std::string cwd;
  std::string origin_pod;
  std::string created_at;
  std::vector<AttemptRecord> attempts;
  // Set once the run is over for good (succeeded, failed, cancelled), so that
  // no later start resumes it.
  std::optional<std::string> final_status;
  // Set on this disk's copy when another instance took the run (its claim
  // won, or it fenced this one): why and when. The copy is stale: never
  // resumed from here, and replaced by the branch's copy when one exists.
  std::optional<std::string> handed_over;
};

inline constexpr const char* kRunParamsFile = "run-params.json";

// run-params.json is read from branches and disks that anyone with push or
// volume access can write: it is bounded like any input from outside.
inline constexpr std::size_t kMaxRunParamsBytes = 1 << 20;
inline constexpr std::size_t kMaxAttemptRecords = 1000;
inline constexpr std::size_t kMaxAttemptErrorBytes = 1024;
// A new run's run-params.json (its request, its rendered template) takes at
// most half of kMaxRunParamsBytes: the rest is its attempt history's, so that
// the file every checkpoint saves stays one a restore reads back.
inline constexpr std::size_t kMaxNewRunParamsBytes = kMaxRunParamsBytes / 2;

OrderedJson to_json(const RunParams& params);
// The file's text, as write_run_params() writes it.
std::string run_params_text(const RunParams& params);
// Throws std::runtime_error naming the field that is missing, malformed or
// over its limit.
RunParams run_params_from_json(const OrderedJson& json);
// The same from the file's text, refusing it before parsing when it is too
// large or nested too deep.
RunParams run_params_from_text(std::string_view text);
// How many entries `json`'s "attempts" holds, for a listing that shows a
// run-params.json run_params_from_json() may refuse; 0 when it has none.
std::size_t listed_attempts(const OrderedJson& json);

// What a run's two budgets have spent (docs/serve.md "The two budgets"): `failures`,
// attempts that ended by the run's own doing (crashed, deferred; an attempt
// whose end no pod recorded, once a later one started), against
// --max-attempts; `interruptions`, attempts a shutdown or another instance
// ended (a rollout, an eviction, a scale-down), against --max-interruptions.
struct SpentBudgets {
  int failures = 0;
  int interruptions = 0;
};
SpentBudgets spent_budgets(const RunParams& params);

// Temp file, fsync, rename, fsync of the directory (unless `atomic` suffices).
void write_run_params(const std::filesystem::path& run_dir, const RunParams& params,
                      Durability durability = Durability::synced);
// nullopt when the run dir has no run-params.json; throws when it is malformed.
std::optional<RunParams> read_run_params(const std::filesystem::path& run_dir);
// Marks the run dir's copy as handed over to another instance (see
// RunParams::handed_over); a dir with no run-params.json is left alone.
void mark_handed_over(const std::filesystem::path& run_dir, const std::string& why);

}  // namespace inflight::checkpoint
