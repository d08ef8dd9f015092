// The options table (docs/serve.md "Options, variables and the config file"): every default and
// range of inflight's options is written here and nowhere else.
#include "inflight/supervisor/config/options.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <stdexcept>

#include "inflight/checkpoint/store_types.hpp"

namespace inflight {

namespace {

constexpr std::int64_t kNoMax = std::numeric_limits<std::int64_t>::max();

using G = OptionGroup;
using K = OptionKind;

std::vector<OptionSpec> build_table() {
  // TreeLimits keeps the restore limits' defaults: the agent's own home for them.
  const checkpoint::TreeLimits tree;
  return {
      {"config", G::store, K::text, "FILE", "", "JSON config file"},
      {"results-repo", G::store, K::text, "URL", "./.inflight/results.git",
       "git remote URL of the results repo"},
      {"runs-dir", G::store, K::text, "DIR", "./.inflight/runs",
       "parent of every run's output directory"},
      {"pod-name", G::store, K::text, "NAME", "",
       "identity of this instance in branch names; unset: the host name"},
      {"git-username", G::store, K::text, "NAME", "", "HTTPS user name"},
      {"git-token", G::store, K::text, "TOKEN", "", "HTTPS token, used as the password"},
      {"git-token-file", G::store, K::text, "FILE", "",
       "file holding --git-token (one trailing newline dropped)"},
      {"git-ssh-key", G::store, K::text, "FILE", "", "SSH private key file (ed25519 or ecdsa)"},
      {"git-ssh-known-hosts", G::store, K::text, "FILE", "",
       "known_hosts file to check the server's host key"},
      {"git-ca-file", G::store, K::text, "FILE", "", "CA bundle for HTTPS"},
      {"git-timeout", G::store, K::duration, "DURATION", "60s", "deadline of one network step"},
      {"checkpoint-exclude", G::store, K::list, "GLOBS", ".env,*.pem,*.key,id_rsa*",
       "comma-separated globs left out of checkpoints"},
      {"restore-max-bytes", G::store, K::integer, "N", std::to_string(tree.max_bytes),
       "largest checkpoint tree restored, in bytes", 1, kNoMax},
      {"restore-max-files", G::store, K::integer, "N", std::to_string(tree.max_files),
       "most files and directories in a checkpoint tree restored", 1, kNoMax},
      {"publish", G::store, K::text, "on|off", "on",
       "publish each finished run to refs/inflight-results/<run-id> and the results index "
       "before its checkpoint branch is deleted"},
      {"results-ref-retention", G::store, K::duration, "DURATION", "10m",
       "how long a result ref stays once layout 2's archive holds its result; then the pod that "
       "folded it deletes the ref; at least --git-timeout"},
      {"results-layout", G::store, K::text, "1|2", "2",
       "the layout a results repo with no index gets at its first publish: 2, the history "
       "layout (a log and an archive); 1, one result ref per run and the inflight-index branch, "
       "as releases before 2026-11-30 wrote, and no result ref deleted by this pod; a repo keeps "
       "the layout it has"},
      {"max-attempts", G::store, K::integer, "N", "3",
       "attempts that end by the run's own doing (crashed, deferred) before it is failed", 1, 1000},
      {"max-interruptions", G::store, K::integer, "N", "50",
       "attempts a shutdown or another instance ends (rollouts, evictions) before the run is "
       "failed",
       1, 1000},
      {"log-format", G::store, K::text, "text|json", "",
       "log lines; unset: text on a terminal, json otherwise"},
      {"grace-period", G::run, K::duration, "DURATION", "30s", "the whole shutdown budget"},
      {"flush-window", G::run, K::duration, "DURATION", "2s",
       "how long children get after their stop signal; under --grace-period less max(1s, 5%)"},
      {"containment", G::run, K::text, "auto|cgroup|shim", "auto",
       "how every process of a run ends with it: a cgroup per attempt, or the run shim "
       "alone; auto: cgroup when serve's cgroup can be written"},
      {"checkpoint-interval", G::run, K::duration, "DURATION", "30s",
       "periodic checkpoints; 0 disables"},
      {"model-listen", G::run, K::text, "HOST:PORT", "127.0.0.1:0",
       "loopback address through which children reach the config's models; port 0: any free one"},
      {"model-max-request-bytes", G::run, K::integer, "N", std::to_string(32 << 20),
       "largest request body a child may send to a model; beyond it 413", 1024, 1ll << 30},
      {"model-max-answer-bytes", G::run, K::integer, "N", std::to_string(64 << 20),
       "largest answer recorded in the journal; a larger one is passed through, not recorded", 1024,
       1ll << 32},
      {"model-max-journal-bytes", G::run, K::integer, "N", std::to_string(256 << 20),
       "largest model-call journal of a run; beyond it recording stops and calls go on; at most "
       "half of --restore-max-bytes",
       1 << 20, kNoMax},
      {"model-max-calls-per-run", G::run, K::integer, "N", "64",
       "model calls one run may have in flight at once; beyond it 429", 1, 100000},
      {"model-max-calls-per-model", G::run, K::integer, "N", "512",
       "model calls to one model in flight at once, of every run; beyond it 429", 1, 1000000},
      {"model-max-connections-per-run", G::run, K::integer, "N", "256",
       "connections one run may hold open to the model listener; beyond it 429", 1, 100000},
      {"listen", G::serve, K::text, "HOST:PORT", "127.0.0.1:3117", "address of the HTTP API"},
      {"api-token", G::serve, K::text, "TOKEN", "", "bearer token required by the API"},
      {"api-token-file", G::serve, K::text, "FILE", "",
       "file holding --api-token (one trailing newline dropped)"},
      {"max-concurrent", G::serve, K::integer, "N", "4", "runs at once; the rest are queued", 1,
       10000},
      {"max-queued", G::serve, K::integer, "N", "1000",
       "queued runs at most; beyond it submits get 503 queue_full", 0, 1000000},
      {"keep-finished", G::serve, K::duration, "DURATION", "24h",
       "how long a finished run stays in the API and its dir on disk (its result is published)"},
      {"max-connections", G::serve, K::integer, "N", "256",
       "open HTTP connections at most; beyond it 503 (8 more kept for /healthz and /readyz)", 1,
       100000},
      {"max-connections-per-client", G::serve, K::integer, "N", "32",
       "open HTTP connections from one client address at most; beyond it 503", 1, 100000},
  };
}

}  // namespace

std::string OptionSpec::env_name() const {
  std::string env = "INFLIGHT_";
  for (char c : name) env += c == '-' ? '_' : static_cast<char>(std::toupper(c));
  return env;
}

std::string OptionSpec::file_key() const {
  std::string key = name;
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

const std::vector<OptionSpec>& option_table() {
  static const std::vector<OptionSpec> table = build_table();
  return table;
}

const OptionSpec& option_spec(std::string_view name) {
  for (const auto& spec : option_table())
    if (spec.name == name) return spec;
  throw std::logic_error("no option named " + std::string(name));
}

std::vector<const OptionSpec*> options_of(OptionGroup group) {
  std::vector<const OptionSpec*> specs;
  for (const auto& spec : option_table())
    if (spec.group == group) specs.push_back(&spec);
  return specs;
}

const OptionSpec* option_by_file_key(std::string_view key) {
  for (const auto& spec : option_table())
    if (spec.file_key() == key) return &spec;
  return nullptr;
}

std::string help_text(const OptionSpec& spec) {
  const std::string shown_default =
      spec.default_text.empty() ? "" : "default " + spec.default_text + "; ";
  return spec.help + " (" + shown_default + "env " + spec.env_name() + ")";
}

}  // namespace inflight
