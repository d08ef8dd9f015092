// The serve side of AgentCheckpoints: spawns one agent per store operation,
// feeds it the request, collects its answer, and kills it at the deadline.
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <boost/asio/readable_pipe.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/writable_pipe.hpp>
#include <boost/asio/write.hpp>
#include <csignal>
#include <memory>

#include "inflight/checkpoint/run_params.hpp"
#include "inflight/fd.hpp"
#include "inflight/supervisor/checkpoint_agent.hpp"
#include "inflight/supervisor/child_process.hpp"
#include "inflight/supervisor/log.hpp"

extern char** environ;

namespace inflight {

namespace fs = std::filesystem;

namespace {

// One agent process, from spawn to its answer (or its deadline).
struct AgentCall : std::enable_shared_from_this<AgentCall> {
  explicit AgentCall(boost::asio::io_context& io) : input(io), output(io), timer(io) {}

  boost::asio::writable_pipe input;
  boost::asio::readable_pipe output;
  boost::asio::steady_timer timer;
  std::string request;
  std::string response;
  std::array<char, 4096> buffer{};
  bool output_closed = false;
  bool exited = false;
  bool timed_out = false;
  std::string display_url;
  std::function<void(const OrderedJson&)> done;

  void read() {
    output.async_read_some(
        boost::asio::buffer(buffer),
        [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
          if (ec) {
            self->output_closed = true;
            return self->finish_if_complete();
          }
          self->response.append(self->buffer.data(), n);
          self->read();
        });
  }

  void finish_if_complete() {
    if (!output_closed || !exited || !done) return;
    timer.cancel();
    auto callback = std::move(done);
    callback(result());
  }

  OrderedJson result() const {
    if (timed_out)
      return {{"ok", false},
              {"kind", "deadline"},
              {"error", "no answer from " + display_url + " before the deadline"}};
    auto parsed = OrderedJson::parse(response, nullptr, false);
    if (parsed.is_object() && parsed.contains("ok")) return parsed;
    return {{"ok", false}, {"kind", "other"}, {"error", "the checkpoint agent gave no answer"}};
  }
};

std::string without_password(const std::string& url) {
  const auto scheme = url.find("://");
  const auto at = url.find('@', scheme == std::string::npos ? 0 : scheme + 3);
  if (scheme == std::string::npos || at == std::string::npos) return url;
  const auto colon = url.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon) + url.substr(at);
}

std::pair<Fd, Fd> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  return {Fd(fds[0]), Fd(fds[1])};
}

}  // namespace

fs::path cache_repo_path(const fs::path& runs_dir) {
  return runs_dir.parent_path() / "cache.git";
}

AgentCheckpoints::AgentCheckpoints(boost::asio::io_context& io, ChildReaper& reaper,
                                   const StoreSettings& store, fs::path runs_dir)
    : io_(io),
      reaper_(reaper),
      runs_dir_(std::move(runs_dir)),
      pod_(store.pod_name),
      store_({{"cache_dir", cache_repo_path(runs_dir_).string()},
              {"url", store.results_repo},
              {"username", store.git_username},
              {"token", store.git_token},
              {"ssh_key", store.git_ssh_key.string()},
              {"known_hosts", store.git_ssh_known_hosts.string()},
              {"ca_file", store.git_ca_file.string()},
              {"excludes", store.checkpoint_exclude},
              {"restore_max_bytes", store.restore_max_bytes}}),
      display_url_(without_password(store.results_repo)),
      agent_binary_(fs::read_symlink("/proc/self/exe")) {}

AgentCheckpoints::~AgentCheckpoints() {
  for (pid_t pid : running_) signal_group(pid, SIGKILL);
}

void AgentCheckpoints::call(OrderedJson request, SteadyClock::time_point deadline,
                            std::function<void(const OrderedJson&)> done) {
  request["store"] = store_;
  auto call = std::make_shared<AgentCall>(io_);
  call->display_url = display_url_;
  call->done = std::move(done);
  call->request = request.dump();
  auto [stdin_read, stdin_write] = make_pipe();
  auto [stdout_read, stdout_write] = make_pipe();
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) env.emplace_back(*entry);
  const pid_t pid = spawn_child(io_, {{agent_binary_.string(), "checkpoint-agent"},
                                      fs::current_path(),
                                      env,
                                      stdin_read.get(),
                                      stdout_write.get(),
                                      STDERR_FILENO});
  running_.insert(pid);
  call->input.assign(stdin_write.release());
  call->output.assign(stdout_read.release());
  boost::asio::async_write(call->input, boost::asio::buffer(call->request),
                           [call](boost::system::error_code, std::size_t) { call->input.close(); });
  call->read();
  call->timer.expires_at(deadline);
  call->timer.async_wait([call, pid](boost::system::error_code ec) {
    if (ec || call->exited) return;
    call->timed_out = true;
    signal_group(pid, SIGKILL);
  });
  reaper_.watch(pid, [this, call, pid](int) {
    running_.erase(pid);
    call->exited = true;
    call->finish_if_complete();
  });
}

void AgentCheckpoints::save(const CheckpointRequest& request, SteadyClock::time_point deadline,
                            std::function<void(CheckpointResult)> done) {
  const std::string branch = "inflight/" + request.origin_pod + "/" + request.run_id;
  call({{"op", "save"},
        {"run_dir", fs::absolute(request.run_dir).string()},
        {"origin_pod", request.origin_pod},
        {"run_id", request.run_id},
        {"attempt", request.attempt},
        {"reason", request.reason},
        {"pod", pod_},
        {"records", request.records}},
       deadline, [done = std::move(done), branch](const OrderedJson& r) {
         CheckpointResult result;
         result.branch = branch;
         result.landed = r["ok"].get<bool>();
         result.fenced = r.value("kind", "") == "rejected";
         if (r.contains("commit") && r["commit"].is_string()) result.commit = r["commit"];
         result.error = r.value("error", "");
         done(result);
       });
}

void AgentCheckpoints::release(const std::string& run_id, const std::string& origin_pod,
                               SteadyClock::time_point deadline, std::function<void()> done) {
  call({{"op", "release"}, {"origin_pod", origin_pod}, {"run_id", run_id}}, deadline,
       [done = std::move(done), run_id](const OrderedJson& r) {
         if (!r["ok"].get<bool>())
           log::warn("checkpoint branch not deleted", {{"run_id", run_id}, {"error", r["error"]}});
         else
           log::info("checkpoint branch deleted", {{"run_id", run_id}});
         done();
       });
}

void AgentCheckpoints::restore(const std::vector<RestoredRun>& local,
                               SteadyClock::time_point deadline,
                               std::function<void(RestoreResult)> done) {
  OrderedJson attempts = OrderedJson::object();
  for (const auto& run : local) attempts[run.params.run_id] = run.params.attempts.size();
  call({{"op", "restore"}, {"runs_dir", runs_dir_.string()}, {"pod", pod_}, {"local", attempts}},
       deadline, [local, done = std::move(done)](const OrderedJson& r) {
         if (!r["ok"].get<bool>()) {
           if (r.value("kind", "") == "auth") return done({local, r["error"].get<std::string>()});
           log::error("restore from the results repo failed; resuming local runs only",
                      {{"error", r["error"]}});
           return done({local, std::nullopt});
         }
         for (const auto& problem : r["problems"])
           log::warn("checkpoint not restored", {{"error", problem}});
         std::set<std::string> taken;
         std::vector<RestoredRun> runs;
         for (const auto& lost : r["lost"]) {
           taken.insert(lost.get<std::string>());
           log::info("run claimed by another instance; left to it", {{"run_id", lost}});
         }
         for (const auto& c : r["claimed"]) {
           const fs::path dir = c["dir"].get<std::string>();
           auto params = checkpoint::read_run_params(dir);
           if (!params) continue;
           taken.insert(params->run_id);
           // `refs/heads/inflight/…` → `inflight/…`, as statuses show it.
           runs.push_back({dir, std::move(*params), c["branch"].get<std::string>().substr(11)});
         }
         for (const auto& run : local)
           if (!taken.count(run.params.run_id)) runs.push_back(run);
         done({std::move(runs), std::nullopt});
       });
}

}  // namespace inflight
