// The one home of the names a checkpoint lives under (docs/checkpoints.md "What the results repo
// holds"): run ids, pod names, `refs/heads/inflight/<origin-pod>/<run-id>` branches and the
// `refs/heads/inflight-lease/<pod>` lease of each live instance. Every
// side that builds or reads such a name calls these, so the rules cannot drift.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace inflight::checkpoint {

inline constexpr std::string_view kHeadsPrefix = "refs/heads/";
inline constexpr std::string_view kBranchPrefix = "refs/heads/inflight/";
// Not under kBranchPrefix: `inflight/<pod>` would clash with the directory
// `inflight/<pod>/` that holds the pod's run branches.
inline constexpr std::string_view kLeasePrefix = "refs/heads/inflight-lease/";
// What one listing of the results repo asks for: run branches, leases and
// the index branch.
inline constexpr std::string_view kInflightPrefix = "refs/heads/inflight";
// A published run's result (docs/results.md): one ref
// per run outside refs/heads, so that a listing or a clone of the branches
// never downloads it and an old result can be deleted on its own.
inline constexpr std::string_view kResultPrefix = "refs/inflight-results/";
// The branch that holds one small JSON summary per published run.
inline constexpr std::string_view kIndexRef = "refs/heads/inflight-index";

// Layout 2 of the results repo (docs/design/history-layout.md §3.1), where a new run costs the
// same however many were published before it:
// - the archive, a chain of commits whose parents are published results, that keeps each result
//   reachable once its own ref is deleted. No pod ever fetches it; it is named by its tip only.
inline constexpr std::string_view kArchiveRef = "refs/inflight-archive/results";
// - the index as a snapshot of entries in buckets, and a log of the entries added since.
inline constexpr std::string_view kRunsRef = "refs/heads/inflight-runs";
inline constexpr std::string_view kRunsLogRef = "refs/heads/inflight-runs-log";
// The snapshot's bucket of `run_id`'s entry, one of 256: two lower-case hex digits, the low byte
// of the id's FNV-1a. Fixed forever: every reader finds an entry where a writer put it.
std::string runs_bucket(std::string_view run_id);

// The rule of run ids (and template names), as error messages show it.
inline constexpr std::string_view kRunIdPattern = "[A-Za-z0-9][A-Za-z0-9._-]{0,63}";
// Whether `id` matches kRunIdPattern.
bool is_valid_run_id(std::string_view id);
// `r-YYYYMMDDTHHMMSSZ-<6 hex>`
std::string generate_run_id();

// A pod name is one component of a git branch name: 1 to 253 printable ASCII
// bytes, none of git's special characters, no leading dot, no `..`.
bool is_valid_pod_name(std::string_view pod);

struct BranchName {
  std::string pod;
  std::string run_id;
};

// `refs/heads/inflight/<origin-pod>/<run-id>`
std::string branch_ref(const BranchName& name);
// `refs/heads/inflight/…` → `inflight/…`, as statuses and tables show it.
std::string short_branch(std::string_view ref);
// `inflight/<origin-pod>/<run-id>`: short_branch(branch_ref(name)).
std::string branch_name(const BranchName& name);
// The parts of `refs/heads/inflight/<pod>/<run-id>`; nullopt for any other
// shape, or for a pod or run id that breaks its rule.
std::optional<BranchName> parse_branch_ref(std::string_view ref);
// What `inflight resume` and `inflight run` name: a run id (`r-1` → {"", r-1}), or a branch,
// `inflight/<pod>/<run-id>` with or without `refs/heads/`; nullopt for anything else.
std::optional<BranchName> parse_run_target(std::string_view target);

// `refs/heads/inflight-lease/<pod>`
std::string lease_ref(std::string_view pod);
// The pod of a lease ref; nullopt for any other shape or an invalid pod name.
std::optional<std::string> parse_lease_ref(std::string_view ref);

// `refs/inflight-results/<run-id>`
std::string result_ref(std::string_view run_id);
// The run id of a result ref; nullopt for any other shape or an invalid id.
std::optional<std::string> parse_result_ref(std::string_view ref);
// `runs/<run-id>.json`, the run's file in the index branch's tree.
std::string index_path(std::string_view run_id);

}  // namespace inflight::checkpoint
