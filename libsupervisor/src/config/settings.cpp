// Reads every option from its flag, INFLIGHT_* variable, config key or
// default, and refuses values that cannot work before anything starts.
#include "inflight/supervisor/config/settings.hpp"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "inflight/core/bounded_json.hpp"
#include "inflight/core/branch_name.hpp"
#include "inflight/supervisor/process/sibling_binaries.hpp"

namespace inflight {

const std::vector<FlagSpec> kStoreFlags{
    {"config", "JSON config file"},
    {"results-repo", "git remote URL of the results repo"},
    {"runs-dir", "parent of every run's output directory"},
    {"pod-name", "identity of this instance in branch names"},
    {"git-username", "HTTPS user name"},
    {"git-token", "HTTPS token (used as password)"},
    {"git-ssh-key", "SSH private key file (ed25519 or ecdsa)"},
    {"git-ssh-known-hosts", "known_hosts file to check the server's host key"},
    {"git-ca-file", "CA bundle for HTTPS"},
    {"git-timeout", "deadline of one network step, e.g. 60s"},
    {"checkpoint-exclude", "comma-separated globs left out of checkpoints"},
    {"restore-max-bytes", "largest checkpoint tree restored, in bytes"},
    {"restore-max-files", "most files and directories in a checkpoint tree restored"},
    {"max-attempts", "attempts a run gets before it is failed"},
    {"log-format", "text or json"},
};

const std::vector<FlagSpec> kRunFlags{
    {"grace-period", "the whole shutdown budget"},
    {"flush-window", "how long children get after SIGTERM"},
    {"checkpoint-interval", "periodic checkpoints; 0 disables"},
};

const std::vector<FlagSpec> kServeFlags{
    {"listen", "HOST:PORT of the HTTP API"},
    {"api-token", "bearer token required by the API"},
    {"max-concurrent", "runs at once; the rest are queued"},
    {"max-queued", "queued runs at most; beyond it submits get 503 queue_full"},
    {"max-connections", "open HTTP connections at most; beyond it 503"},
};

namespace {

std::string env_name(const std::string& flag) {
  std::string name = "INFLIGHT_";
  for (char c : flag) name += c == '-' ? '_' : static_cast<char>(std::toupper(c));
  return name;
}

std::string file_key(const std::string& flag) {
  std::string key = flag;
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

std::string scalar_text(const OrderedJson& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {
    std::string joined;
    for (const auto& item : value) {
      if (!joined.empty()) joined += ',';
      joined += scalar_text(item);
    }
    return joined;
  }
  return value.dump();
}

std::string default_pod_name() {
  if (const char* host = std::getenv("HOSTNAME"); host && *host) return host;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0 && name[0]) return name;
  return "localhost";
}

}  // namespace

OptionSources::OptionSources(std::map<std::string, std::string> flags, OrderedJson file,
                             EnvLookup env)
    : flags_(std::move(flags)), file_(std::move(file)), env_(std::move(env)) {}

std::optional<std::string> OptionSources::process_env(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (!value) return std::nullopt;
  return std::string(value);
}

OrderedJson OptionSources::load_config_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("config file " + path.string() + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  std::string error;
  const auto parsed = parse_bounded_json(text.str(), {}, error);
  if (!parsed) throw UsageError("config file " + path.string() + ": " + error);
  const auto& json = *parsed;
  if (!json.is_object()) throw UsageError("config file " + path.string() + ": not a JSON object");
  for (const auto& [key, value] : json.items()) {
    // An init-capture: clang before 16 cannot capture a structured binding.
    const auto known = [&key = key](const FlagSpec& f) { return file_key(f.name) == key; };
    const bool is_template = key == "child" || key == "children";
    if (!is_template && std::none_of(kStoreFlags.begin(), kStoreFlags.end(), known) &&
        std::none_of(kRunFlags.begin(), kRunFlags.end(), known) &&
        std::none_of(kServeFlags.begin(), kServeFlags.end(), known))
      throw UsageError("config file " + path.string() + ": unknown key " + key);
    // A null or boolean would otherwise be read as the text "null" or "true".
    const auto is_string = [](const OrderedJson& item) { return item.is_string(); };
    if (!is_template && !value.is_string() && !value.is_number() &&
        !(value.is_array() && std::all_of(value.begin(), value.end(), is_string)))
      throw UsageError("config file " + path.string() + ": key " + key +
                       " must be a string, a number or an array of strings");
  }
  return json;
}

std::optional<OptionSources::Found> OptionSources::lookup(const std::string& flag) const {
  if (auto it = flags_.find(flag); it != flags_.end()) return Found{it->second, "--" + flag};
  if (auto value = env_(env_name(flag))) return Found{*value, env_name(flag)};
  if (file_.is_object() && file_.contains(file_key(flag)))
    return Found{scalar_text(file_[file_key(flag)]), "config key " + file_key(flag)};
  return std::nullopt;
}

std::string OptionSources::text(const std::string& flag, const std::string& fallback) const {
  auto found = lookup(flag);
  return found ? found->value : fallback;
}

Duration OptionSources::duration(const std::string& flag, Duration fallback) const {
  auto found = lookup(flag);
  if (!found) return fallback;
  auto parsed = parse_duration(found->value);
  if (!parsed)
    throw UsageError(found->source + ": '" + found->value +
                     "' is not a duration (use 250ms, 30s, 5m, 2h or 7d)");
  return *parsed;
}

std::int64_t OptionSources::integer(const std::string& flag, std::int64_t fallback,
                                    std::int64_t min, std::int64_t max) const {
  auto found = lookup(flag);
  if (!found) return fallback;
  std::int64_t value = 0;
  const auto* end = found->value.data() + found->value.size();
  const auto [rest, ec] = std::from_chars(found->value.data(), end, value);
  if (ec != std::errc{} || rest != end || value < min || value > max)
    throw UsageError(found->source + ": '" + found->value + "' is not an integer from " +
                     std::to_string(min) + " to " + std::to_string(max));
  return value;
}

std::vector<std::string> OptionSources::list(const std::string& flag,
                                             const std::string& fallback) const {
  std::vector<std::string> items;
  std::stringstream in(text(flag, fallback));
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

StoreSettings read_store_settings(const OptionSources& sources) {
  StoreSettings s;
  s.results_repo = sources.text("results-repo", "./.inflight/results.git");
  s.runs_dir = sources.text("runs-dir", "./.inflight/runs");
  s.pod_name = sources.text("pod-name", default_pod_name());
  if (!checkpoint::is_valid_pod_name(s.pod_name))
    throw UsageError("--pod-name: '" + printable(s.pod_name) +
                     "' cannot be part of a git branch name");
  s.git_username = sources.text("git-username", "");
  s.git_token = sources.text("git-token", "");
  s.git_ssh_key = sources.text("git-ssh-key", "");
  s.git_ssh_known_hosts = sources.text("git-ssh-known-hosts", "");
  s.git_ca_file = sources.text("git-ca-file", "");
  s.git_timeout = sources.duration("git-timeout", Duration(60000));
  s.checkpoint_exclude = sources.list("checkpoint-exclude", ".env,*.pem,*.key,id_rsa*");
  s.restore_limits = {
      .max_bytes =
          static_cast<std::uint64_t>(sources.integer("restore-max-bytes", 1ll << 30, 1, INT64_MAX)),
      .max_files =
          static_cast<std::uint64_t>(sources.integer("restore-max-files", 100000, 1, INT64_MAX))};
  s.max_attempts = sources.integer("max-attempts", 3, 1, 1000);
  const auto format = sources.text("log-format", "");
  if (format == "text")
    s.log_format = log::Format::text;
  else if (format == "json")
    s.log_format = log::Format::json;
  else if (format.empty())
    s.log_format = log::default_format();
  else
    throw UsageError("--log-format: '" + format + "' is not text or json");
  return s;
}

namespace {

void read_listen(const OptionSources& sources, ServeSettings& s) {
  const auto listen = sources.text("listen", "127.0.0.1:3117");
  const auto colon = listen.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    const auto* end = listen.data() + listen.size();
    const auto [rest, ec] = std::from_chars(listen.data() + colon + 1, end, port);
    if (ec != std::errc{} || rest != end) port = -1;
  }
  std::string host = colon == std::string::npos ? "" : listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (port < 0 || port > 65535 || ec)
    throw UsageError("--listen: '" + listen + "' is not HOST:PORT with a numeric address");
  s.listen_host = address.to_string();
  s.listen_port = static_cast<unsigned short>(port);
  s.api_token = sources.text("api-token", "");
  if (!address.is_loopback() && s.api_token.empty())
    throw UsageError("--listen " + listen +
                     " is not a loopback address: set --api-token so the API is not open to all");
}

}  // namespace

ChildTemplates read_child_templates(const OptionSources& sources) {
  // Missing, it keeps the build-tree place, where `cmake --build` puts it.
  const auto demo =
      find_sibling_binary(kDemoChildName).value_or(sibling_binary_places(kDemoChildName).front());
  return ChildTemplates::from_config(sources.file(), demo);
}

ResumeSettings read_resume_settings(const OptionSources& sources) {
  ResumeSettings s;
  s.store = read_store_settings(sources);
  s.grace_period = sources.duration("grace-period", Duration(30000));
  s.flush_window = sources.duration("flush-window", Duration(2000));
  s.checkpoint_interval = sources.duration("checkpoint-interval", Duration(30000));
  s.children = read_child_templates(sources);
  return s;
}

ServeSettings read_serve_settings(const OptionSources& sources) {
  ServeSettings s;
  const auto run = read_resume_settings(sources);
  s.store = run.store;
  s.grace_period = run.grace_period;
  s.flush_window = run.flush_window;
  s.checkpoint_interval = run.checkpoint_interval;
  s.children = run.children;
  read_listen(sources, s);
  s.max_concurrent = sources.integer("max-concurrent", 4, 1, 10000);
  s.max_queued = sources.integer("max-queued", 1000, 0, 1000000);
  s.max_connections = sources.integer("max-connections", 256, 1, 100000);
  return s;
}

}  // namespace inflight
