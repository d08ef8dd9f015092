// Reads every option from its flag, INFLIGHT_* variable, config key or
// default, and refuses values that cannot work before anything starts.
#include "inflight/supervisor/config/settings.hpp"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "inflight/checkpoint/remote_url.hpp"
#include "inflight/core/bounded_json.hpp"
#include "inflight/core/branch_name.hpp"
#include "inflight/core/log.hpp"
#include "inflight/supervisor/process/sibling_binaries.hpp"

namespace inflight {

namespace {

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
  const auto parsed = parse_bounded_json(text.str(), {});
  if (!parsed) throw UsageError("config file " + path.string() + ": " + parsed.error().message);
  const auto& json = *parsed;
  if (!json.is_object()) throw UsageError("config file " + path.string() + ": not a JSON object");
  for (const auto& [key, value] : json.items()) {
    const bool is_template = key == "child" || key == "children" || key == "models";
    if (!is_template && !option_by_file_key(key))
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

std::optional<OptionSources::Found> OptionSources::lookup(const OptionSpec& spec) const {
  if (auto it = flags_.find(spec.name); it != flags_.end()) return Found{it->second, spec.flag()};
  if (auto value = env_(spec.env_name())) return Found{*value, spec.env_name()};
  if (file_.is_object() && file_.contains(spec.file_key()))
    return Found{scalar_text(file_[spec.file_key()]), "config key " + spec.file_key()};
  return std::nullopt;
}

OptionSources::Found OptionSources::value(std::string_view name) const {
  const auto& spec = option_spec(name);
  return lookup(spec).value_or(Found{spec.default_text, "the default of " + spec.flag()});
}

std::optional<std::string> OptionSources::environment(const std::string& name) const {
  return env_(name);
}

std::optional<std::string> OptionSources::given(std::string_view name) const {
  const auto found = lookup(option_spec(name));
  if (!found) return std::nullopt;
  return found->value;
}

std::optional<std::string> OptionSources::source(std::string_view name) const {
  const auto found = lookup(option_spec(name));
  if (!found) return std::nullopt;
  return found->source;
}

std::string OptionSources::text(std::string_view name) const {
  return value(name).value;
}

Duration OptionSources::duration(std::string_view name) const {
  const auto found = value(name);
  auto parsed = parse_duration(found.value);
  if (!parsed)
    throw UsageError(found.source + ": '" + found.value +
                     "' is not a duration (use 250ms, 30s, 5m, 2h or 7d)");
  return *parsed;
}

std::int64_t OptionSources::integer(std::string_view name) const {
  const auto& spec = option_spec(name);
  const auto found = value(name);
  std::int64_t number = 0;
  const auto* end = found.value.data() + found.value.size();
  const auto [rest, ec] = std::from_chars(found.value.data(), end, number);
  if (ec != std::errc{} || rest != end || number < spec.min || number > spec.max)
    throw UsageError(found.source + ": '" + found.value + "' is not an integer from " +
                     std::to_string(spec.min) + " to " + std::to_string(spec.max));
  return number;
}

std::vector<std::string> OptionSources::list(std::string_view name) const {
  std::vector<std::string> items;
  std::stringstream in(text(name));
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

namespace {

// The content of a token file (a mounted Kubernetes Secret, whose value may
// end with a newline); `source` names where its path was given.
std::string read_token_file(const std::string& source, const std::filesystem::path& path) {
  const auto where = source + " " + path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(where + ": cannot be read: " + std::strerror(errno));
  std::string token(kMaxTokenFileBytes + 1, '\0');
  in.read(token.data(), static_cast<std::streamsize>(token.size()));
  if (in.bad()) throw UsageError(where + ": cannot be read");
  token.resize(static_cast<std::size_t>(in.gcount()));
  if (token.size() > kMaxTokenFileBytes)
    throw UsageError(where + ": larger than " + std::to_string(kMaxTokenFileBytes / 1024) +
                     " KiB, not a token");
  if (token.ends_with('\n')) token.pop_back();
  if (token.empty()) throw UsageError(where + ": is empty");
  return token;
}

// A token (`option`) and the file holding it (`option`-file): one of them.
// Sets `file` to the file's path when the token came from it.
std::string read_token(const OptionSources& sources, const std::string& option,
                       std::filesystem::path& file) {
  const auto file_option = option + "-file";
  const auto token = sources.given(option).value_or("");
  file = sources.given(file_option).value_or("");
  if (file.empty()) return token;
  if (!token.empty())
    throw UsageError(*sources.source(option) + " and " + *sources.source(file_option) +
                     " are both given: give the token or the file holding it, not both");
  return read_token_file(*sources.source(file_option), file);
}

}  // namespace

// Where checkpoints go, said once at start (docs/serve.md "Logs and what is said at start"): a
// results repo on a local path dies with the pod's disk unless it is a
// volume, which in Kubernetes is almost always a mistake.
void log_destination(const StoreSettings& store) {
  const auto location = checkpoint::parse_remote_url(store.results_repo);
  const nlohmann::json fields{
      {"results_repo", location.display},
      {"publish", store.publish ? "on" : "off"},
      {"pod", store.pod_name},
      {"runs_dir", std::filesystem::absolute(store.runs_dir).lexically_normal().string()}};
  log::info("checkpoints go to the results repo", fields);
  if (!location.local_path) return;
  const char* why =
      "the results repo is a local path: checkpoints and results last only as long as this disk";
  if (std::getenv("KUBERNETES_SERVICE_HOST") != nullptr)
    log::error(std::string(why) + ", and this is a Kubernetes pod; set --results-repo to a remote",
               fields);
  else
    log::warn(why, fields);
}

StoreSettings read_store_settings(const OptionSources& sources) {
  StoreSettings s;
  s.results_repo = sources.text("results-repo");
  s.runs_dir = sources.text("runs-dir");
  s.pod_name = sources.given("pod-name").value_or(default_pod_name());
  if (!checkpoint::is_valid_pod_name(s.pod_name))
    throw UsageError("--pod-name: '" + printable(s.pod_name) +
                     "' cannot be part of a git branch name");
  s.git_username = sources.text("git-username");
  s.git_token = read_token(sources, "git-token", s.git_token_file);
  s.git_ssh_key = sources.text("git-ssh-key");
  s.git_ssh_known_hosts = sources.text("git-ssh-known-hosts");
  s.git_ca_file = sources.text("git-ca-file");
  s.git_timeout = sources.duration("git-timeout");
  s.longest_agent_step = s.git_timeout;
  s.checkpoint_exclude = sources.list("checkpoint-exclude");
  s.restore_limits = {
      .max_bytes = static_cast<std::uint64_t>(sources.integer("restore-max-bytes")),
      .max_files = static_cast<std::uint64_t>(sources.integer("restore-max-files"))};
  s.max_attempts = static_cast<int>(sources.integer("max-attempts"));
  s.max_interruptions = static_cast<int>(sources.integer("max-interruptions"));
  const auto publish = sources.text("publish");
  if (publish != "on" && publish != "off")
    throw UsageError("--publish: '" + publish + "' is not on or off");
  s.publish = publish == "on";
  s.results_ref_retention = sources.duration("results-ref-retention");
  // A publish looks at layout 2's archive, then creates the result ref, within one git step; an
  // unref sooner after a fold could fall between the two (docs/results.md "The history layout").
  if (s.results_ref_retention < s.git_timeout)
    throw UsageError("--results-ref-retention: '" + sources.text("results-ref-retention") +
                     "' is shorter than --git-timeout '" + sources.text("git-timeout") + "'");
  const auto layout = sources.text("results-layout");
  if (layout != "1" && layout != "2")
    throw UsageError("--results-layout: '" + printable(layout) + "' is not 1 or 2");
  s.results_layout = layout == "1" ? 1 : 2;
  const auto format = sources.text("log-format");
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

struct ListenAddress {
  boost::asio::ip::address address;
  unsigned short port = 0;
};

// HOST:PORT with a numeric host (or localhost); UsageError naming `option`.
ListenAddress parse_listen(const std::string& option, const std::string& listen) {
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
    throw UsageError(option + ": '" + listen + "' is not HOST:PORT with a numeric address");
  return {address, static_cast<unsigned short>(port)};
}

void read_listen(const OptionSources& sources, ServeSettings& s) {
  const auto listen = sources.text("listen");
  const auto [address, port] = parse_listen("--listen", listen);
  s.listen_host = address.to_string();
  s.listen_port = port;
  s.api_token = read_token(sources, "api-token", s.api_token_file);
  if (!address.is_loopback() && s.api_token.empty())
    throw UsageError("--listen " + listen +
                     " is not a loopback address: set --api-token (or --api-token-file) so the API "
                     "is not open to all");
}

}  // namespace

ChildTemplates read_child_templates(const OptionSources& sources) {
  // Missing, it keeps the build-tree place, where `cmake --build` puts it.
  const auto demo =
      find_sibling_binary(kDemoChildName).value_or(sibling_binary_places(kDemoChildName).front());
  return ChildTemplates::from_config(sources.file(), demo);
}

Duration push_margin(Duration grace_period) {
  return std::max<Duration>(std::chrono::seconds(1), grace_period / 20);
}

namespace {

// A flush window that leaves no time to push would lose every interrupted
// run's last checkpoint at each shutdown.
void check_flush_window(const ResumeSettings& s) {
  const Duration limit = s.grace_period - push_margin(s.grace_period);
  if (s.flush_window < limit) return;
  throw UsageError("--flush-window " + format_duration(s.flush_window) +
                   " leaves no time to push within --grace-period " +
                   format_duration(s.grace_period) + ": it must be under " +
                   format_duration(limit) + " (the grace period less max(1s, 5%))");
}

// `file` resolved to the file itself (a Kubernetes Secret's is a symlink into
// `..data/`), added unless empty or missing: nothing to hide then.
void add_hidden_file(std::vector<std::filesystem::path>& hidden,
                     const std::filesystem::path& file) {
  // Absolute, not resolved: the run shim resolves it at each attempt, since
  // a Kubernetes Secret's file links into a folder replaced at each update.
  std::error_code ec;
  if (file.empty() || !std::filesystem::exists(file, ec)) return;
  hidden.push_back(std::filesystem::absolute(file).lexically_normal());
}

}  // namespace

namespace {

// A model's key, from the instance's environment or a file (a mounted Secret).
std::string read_model_key(const ModelSpec& spec, const OptionSources& sources) {
  const auto where = "models." + spec.name;
  if (!spec.api_key_file.empty())
    return read_token_file("config key " + where + ".api_key_file", spec.api_key_file);
  auto key = sources.environment(spec.api_key_env).value_or("");
  if (key.empty())
    throw UsageError("config key " + where + ".api_key_env: " + spec.api_key_env +
                     " is not set in inflight's environment");
  return key;
}

// The journal's limits must keep a run restorable: a run dir beyond
// --restore-max-bytes would never come back.
void check_journal_limit(const ModelSettings& models, const StoreSettings& store) {
  const auto half = store.restore_limits.max_bytes / 2;
  if (models.max_journal_bytes <= half) return;
  throw UsageError("--model-max-journal-bytes " + std::to_string(models.max_journal_bytes) +
                   " is over half of --restore-max-bytes (" + std::to_string(half) +
                   "): a run holding such a journal could not be restored");
}

}  // namespace

ModelSpecs model_specs(const ModelSettings& models) {
  ModelSpecs specs;
  for (const auto& [name, route] : models.models) specs.emplace(name, route.spec);
  return specs;
}

std::set<std::string> withheld_variables(const ChildTemplates& children,
                                         const ModelSettings& models) {
  auto names = children.referenced_variables();
  for (const auto& [name, route] : models.models)
    if (!route.spec.api_key_env.empty()) names.insert(route.spec.api_key_env);
  return names;
}

ModelSettings read_model_settings(const OptionSources& sources, const StoreSettings& store) {
  ModelSettings m;
  const auto [address, port] = parse_listen("--model-listen", sources.text("model-listen"));
  if (!address.is_loopback())
    throw UsageError("--model-listen: '" + sources.text("model-listen") +
                     "' is not a loopback address: only this instance's children may reach it");
  m.listen_host = address.to_string();
  m.listen_port = port;
  m.max_request_bytes = static_cast<std::uint64_t>(sources.integer("model-max-request-bytes"));
  m.max_answer_bytes = static_cast<std::uint64_t>(sources.integer("model-max-answer-bytes"));
  m.max_journal_bytes = static_cast<std::uint64_t>(sources.integer("model-max-journal-bytes"));
  m.max_calls_per_run = static_cast<std::size_t>(sources.integer("model-max-calls-per-run"));
  m.max_calls_per_model = static_cast<std::size_t>(sources.integer("model-max-calls-per-model"));
  m.max_connections_per_run =
      static_cast<std::size_t>(sources.integer("model-max-connections-per-run"));
  for (auto& [name, spec] : parse_model_specs(sources.file())) {
    auto key = read_model_key(spec, sources);
    m.models.emplace(name, ModelRoute{std::move(spec), std::move(key)});
  }
  if (!m.models.empty()) check_journal_limit(m, store);
  return m;
}

ResumeSettings read_resume_settings(const OptionSources& sources) {
  ResumeSettings s;
  s.store = read_store_settings(sources);
  s.grace_period = sources.duration("grace-period");
  s.store.longest_agent_step = std::max(s.store.git_timeout, s.grace_period);
  s.flush_window = sources.duration("flush-window");
  check_flush_window(s);
  s.checkpoint_interval = sources.duration("checkpoint-interval");
  const auto containment = sources.text("containment");
  const auto mode = containment_mode_named(containment);
  if (!mode) throw UsageError("--containment: '" + containment + "' is not auto, cgroup or shim");
  s.containment = *mode;
  s.children = read_child_templates(sources);
  s.models = read_model_settings(sources, s.store);
  s.children.check_models(model_specs(s.models));
  s.store.withheld_variables = withheld_variables(s.children, s.models);
  for (const auto& [name, route] : s.models.models)
    add_hidden_file(s.hidden_files, route.spec.api_key_file);
  for (const auto& file :
       {s.store.git_token_file, s.store.git_ssh_key, std::filesystem::path(sources.text("config"))})
    add_hidden_file(s.hidden_files, file);
  return s;
}

ServeSettings read_serve_settings(const OptionSources& sources) {
  ServeSettings s;
  static_cast<ResumeSettings&>(s) = read_resume_settings(sources);
  read_listen(sources, s);
  add_hidden_file(s.hidden_files, s.api_token_file);
  s.max_concurrent = static_cast<int>(sources.integer("max-concurrent"));
  s.max_queued = static_cast<int>(sources.integer("max-queued"));
  s.max_connections = static_cast<int>(sources.integer("max-connections"));
  s.max_connections_per_client = static_cast<int>(sources.integer("max-connections-per-client"));
  s.keep_finished = sources.duration("keep-finished");
  return s;
}

}  // namespace inflight
