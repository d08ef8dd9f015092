// The agent's side of AgentCheckpoints: one store operation per process.
#include <iostream>
#include <iterator>
#include <map>

#include "inflight/checkpoint/checkpoint_store.hpp"
#include "inflight/supervisor/agent_client.hpp"

namespace inflight {

namespace ck = checkpoint;

namespace {

ck::StoreConfig store_config(const OrderedJson& s) {
  ck::StoreConfig config;
  config.cache_dir = s.at("cache_dir").get<std::string>();
  config.remote = {s.at("url").get<std::string>(), s.value("username", ""),
                   s.value("token", ""),           s.value("ssh_key", ""),
                   s.value("known_hosts", ""),     s.value("ca_file", "")};
  config.exclude_globs = s.value("excludes", std::vector<std::string>{});
  config.restore_max_bytes = s.value("restore_max_bytes", std::uint64_t{1} << 30);
  return config;
}

const char* kind_name(ck::GitErrorKind kind) {
  switch (kind) {
    case ck::GitErrorKind::unreachable:
      return "unreachable";
    case ck::GitErrorKind::auth:
      return "auth";
    case ck::GitErrorKind::rejected:
      return "rejected";
    case ck::GitErrorKind::not_found:
      return "not_found";
    case ck::GitErrorKind::hostile_tree:
      return "hostile_tree";
    case ck::GitErrorKind::other:
      break;
  }
  return "other";
}

OrderedJson save(ck::CheckpointStore& store, const OrderedJson& r) {
  const ck::CheckpointInfo info{r.at("run_id").get<std::string>(), r.at("attempt").get<int>(),
                                r.at("reason").get<std::string>(), r.at("pod").get<std::string>(),
                                r.at("records").get<std::uint64_t>()};
  const auto commit =
      store.save(r.at("run_dir").get<std::string>(), r.at("origin_pod").get<std::string>(), info);
  return {{"ok", true}, {"commit", commit ? OrderedJson(*commit) : OrderedJson(nullptr)}};
}

OrderedJson release(ck::CheckpointStore& store, const OrderedJson& r) {
  try {
    store.release(r.at("origin_pod").get<std::string>(), r.at("run_id").get<std::string>());
  } catch (const ck::GitError& e) {
    if (e.kind() != ck::GitErrorKind::not_found) throw;
  }
  return {{"ok", true}};
}

OrderedJson restore(ck::CheckpointStore& store, const OrderedJson& r) {
  const auto only = r.contains("only") ? std::optional(r["only"].get<std::string>()) : std::nullopt;
  const auto report =
      store.restore(r.at("runs_dir").get<std::string>(), r.at("pod").get<std::string>(),
                    r.at("local").get<std::map<std::string, std::size_t>>(), only);
  OrderedJson claimed = OrderedJson::array();
  for (const auto& run : report.claimed)
    claimed.push_back(
        {{"run_id", run.params.run_id}, {"dir", run.dir.string()}, {"branch", run.branch}});
  return {{"ok", true}, {"claimed", claimed}, {"lost", report.lost}, {"problems", report.problems}};
}

OrderedJson perform(const OrderedJson& request) {
  ck::GitLibrary library;
  ck::CheckpointStore store(store_config(request.at("store")));
  const auto op = request.at("op").get<std::string>();
  if (op == "save") return save(store, request);
  if (op == "release") return release(store, request);
  if (op == "restore") return restore(store, request);
  throw std::runtime_error("unknown checkpoint-agent op '" + op + "'");
}

}  // namespace

int run_checkpoint_agent() {
  const std::string text{std::istreambuf_iterator<char>(std::cin), {}};
  OrderedJson result;
  try {
    result = perform(OrderedJson::parse(text));
  } catch (const ck::GitError& e) {
    result = {{"ok", false}, {"kind", kind_name(e.kind())}, {"error", e.what()}};
  } catch (const std::exception& e) {
    result = {{"ok", false}, {"kind", "other"}, {"error", e.what()}};
  }
  std::cout << result.dump() << std::endl;
  return result["ok"].get<bool>() ? 0 : 1;
}

}  // namespace inflight
