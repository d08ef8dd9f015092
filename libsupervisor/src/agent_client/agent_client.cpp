// Spawns one agent per store operation, feeds it the request, collects its
// answer, and kills it when the deadline passes.
#include "inflight/supervisor/agent_client/agent_client.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <boost/asio/readable_pipe.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/writable_pipe.hpp>
#include <boost/asio/write.hpp>
#include <csignal>
#include <memory>

#include "inflight/checkpoint/store_types.hpp"
#include "inflight/core/child_environment.hpp"
#include "inflight/core/fd.hpp"
#include "inflight/supervisor/process/child_process.hpp"
#include "inflight/supervisor/process/sibling_binaries.hpp"

extern char** environ;

namespace inflight {

namespace fs = std::filesystem;

namespace {

// One agent process, from spawn to its answer (or its deadline).
struct AgentCall : AgentInput, std::enable_shared_from_this<AgentCall> {
  explicit AgentCall(boost::asio::io_context& io) : input(io), output(io), timer(io) {}

  // Lines are queued and written one write at a time; a write to an agent
  // that is gone fails (SIGPIPE is ignored) and the rest is dropped: its
  // answer, or its absence, tells the caller.
  void write(const OrderedJson& part) override {
    outbox += part.dump() + "\n";
    if (!writing) write_next();
  }
  void close() override {
    closing = true;
    if (!writing) write_next();
  }

  void write_next() {
    if (outbox.empty()) {
      if (closing) input.close();
      return;
    }
    writing = true;
    sending = std::exchange(outbox, {});
    boost::asio::async_write(
        input, boost::asio::buffer(sending),
        [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
          self->writing = false;
          if (ec) return self->input.close();
          self->write_next();
        });
  }

  boost::asio::writable_pipe input;
  boost::asio::readable_pipe output;
  boost::asio::steady_timer timer;
  std::string outbox;
  std::string sending;
  bool writing = false;
  bool closing = false;
  std::string response;
  std::array<char, 4096> buffer{};
  bool output_closed = false;
  bool exited = false;
  bool timed_out = false;
  std::string display_url;
  std::function<void(const Result<OrderedJson>&)> done;

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

  Result<OrderedJson> result() const {
    if (!timed_out) return read_output(response);
    return Error{.kind = Failure::deadline,
                 .message = "no answer from " + display_url + " before the deadline",
                 .candidates = {}};
  }
};

std::pair<Fd, Fd> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  return {Fd(fds[0]), Fd(fds[1])};
}

// The longest deadline an agent of this instance gets, and a minute for a clock that steps, but
// at least an hour: an operator's `inflight runs` in serve's directory shares its cache with
// other timeouts. An older temp file in the cache is no live agent's.
std::chrono::seconds sweep_temp_after(const StoreSettings& store) {
  return std::max<std::chrono::seconds>(
      std::chrono::ceil<std::chrono::seconds>(store.longest_agent_step) + std::chrono::minutes(1),
      std::chrono::hours(1));
}

}  // namespace

fs::path cache_repo_path(const fs::path& runs_dir) {
  return runs_dir.parent_path() / "cache.git";
}

AgentClient::AgentClient(boost::asio::io_context& io, ChildReaper& reaper,
                         const StoreSettings& store, const fs::path& runs_dir)
    : io_(io),
      reaper_(reaper),
      store_({.cache_dir = cache_repo_path(runs_dir).string(),
              .url = store.results_repo,
              .username = store.git_username,
              .token = store.git_token,
              .ssh_key = store.git_ssh_key.string(),
              .known_hosts = store.git_ssh_known_hosts.string(),
              .ca_file = store.git_ca_file.string(),
              .excludes = store.checkpoint_exclude,
              .restore_max_bytes = store.restore_limits.max_bytes,
              .restore_max_files = store.restore_limits.max_files,
              .claim_lease_seconds = checkpoint::claim_lease_for(store.git_timeout).count(),
              .publish = store.publish,
              .sweep_temp_after_seconds = sweep_temp_after(store).count(),
              .results_ref_retention_seconds =
                  std::chrono::ceil<std::chrono::seconds>(store.results_ref_retention).count(),
              .results_layout = store.results_layout}),
      pod_(store.pod_name),
      display_url_(checkpoint::display_url(store.results_repo)),
      agent_binary_(checkpoint_agent_binary()),
      // Its token comes on stdin; the children's secrets are none of its business.
      env_(agent_environment(environ)) {}

AgentClient::~AgentClient() {
  for (pid_t pid : running_) signal_group(pid, SIGKILL);
}

void AgentClient::send(std::string op, OrderedJson call_json, SteadyClock::time_point deadline,
                       std::function<void(const Result<OrderedJson>&)> done) {
  open(std::move(op), std::move(call_json), deadline, std::move(done))->close();
}

std::shared_ptr<AgentInput> AgentClient::open(
    std::string op, OrderedJson call_json, SteadyClock::time_point deadline,
    std::function<void(const Result<OrderedJson>&)> done) {
  const AgentRequest request{.version = kAgentProtocolVersion,
                             .op = std::move(op),
                             .store = store_,
                             .pod = pod_,
                             .call = std::move(call_json)};
  auto call = std::make_shared<AgentCall>(io_);
  call->display_url = display_url_;
  call->done = std::move(done);
  auto [stdin_read, stdin_write] = make_pipe();
  auto [stdout_read, stdout_write] = make_pipe();
  const pid_t pid = spawn_child(io_, {{agent_binary_.string()},
                                      fs::current_path(),
                                      env_,
                                      stdin_read.get(),
                                      stdout_write.get(),
                                      STDERR_FILENO});
  running_.insert(pid);
  call->input.assign(stdin_write.release());
  call->output.assign(stdout_read.release());
  call->write(OrderedJson(request));
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
  return call;
}

}  // namespace inflight
