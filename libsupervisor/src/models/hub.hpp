// The state the model gateway shares with its sessions and calls: the
// attempts and their tokens, the upstream pools, the counters. A session's
// coroutine holds the hub, so that it stays valid until the event loop drops
// the coroutine, whatever the gateway's own lifetime.
#pragma once

#include <boost/asio/thread_pool.hpp>
#include <boost/beast/http.hpp>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "inflight/supervisor/models/model_gateway.hpp"
#include "inflight/supervisor/models/model_journal.hpp"
#include "loop.hpp"
#include "upstream_pool.hpp"

namespace inflight::models {

// How a call in flight is ended from outside (a cut): its sockets closed.
struct CallHandle {
  std::string run_id;
  int attempt = 0;
  Stream* child = nullptr;
  UpstreamConnection* upstream = nullptr;
  bool cut = false;
  void end();
};

// One attempt of a run, as the gateway sees it: what it may reach, its
// journal, and its calls.
class Attempt {
 public:
  Attempt(boost::asio::io_context& io, std::string run_id, std::filesystem::path run_dir,
          int attempt, std::set<std::string> models, std::string token,
          std::shared_ptr<checkpoint::ModelCounts> counts)
      : run_id(std::move(run_id)),
        run_dir(std::move(run_dir)),
        number(attempt),
        models(std::move(models)),
        token(std::move(token)),
        counts(std::move(counts)),
        journal_read(io) {}

  // Waits until the journal was read (at once when it was).
  Awaitable<void> journal_ready();
  void journal_loaded(JournalScan scan, std::optional<JournalWriter> writer);

  const std::string run_id;
  const std::filesystem::path run_dir;
  const int number;
  const std::set<std::string> models;
  const std::string token;
  std::shared_ptr<checkpoint::ModelCounts> counts;
  bool open = true;  // its child runs: its token works

  bool loaded = false;
  JournalScan journal;  // as read before the attempt's first call
  std::optional<JournalWriter> writer;
  bool journal_full_logged = false;
  bool journal_error_logged = false;
  std::map<std::string, std::size_t> asked;  // recorded digest → requests of this attempt so far

  std::size_t connections = 0;

 private:
  Timer journal_read;
};

class Hub : public std::enable_shared_from_this<Hub> {
 public:
  Hub(boost::asio::io_context& io, ModelSettings settings);

  void start_listening();
  // Joins the worker thread: called by the gateway's destructor.
  void stop();

  std::shared_ptr<Attempt> attempt_of_token(std::string_view token) const;
  void call_started(Attempt& attempt, const std::string& model);
  void call_ended(Attempt& attempt, const std::string& model);
  // Logs a request refused before any upstream (a bad token, a model the run
  // does not name), at most once per 10 s with the count since: a
  // misconfigured child shows in serve's log, a hostile one cannot flood it.
  void refused(unsigned status, const std::string& why);
  void count(const std::string& model, std::string_view source, std::string_view outcome,
             const Usage& usage);

  boost::asio::io_context& io;
  const ModelSettings settings;
  boost::asio::thread_pool workers{1};  // journal reads, large bodies' identities
  std::map<std::string, std::unique_ptr<UpstreamPool>> pools;
  Acceptor acceptor;
  std::map<std::string, std::shared_ptr<Attempt>> attempts;  // by run id
  // token → run id; looked up with a view of the child's header, not a copy
  std::map<std::string, std::string, std::less<>> tokens;
  std::map<std::string, std::size_t> in_flight;  // by run id, of any attempt
  std::map<std::string, std::size_t> in_flight_by_model;
  std::size_t in_flight_total = 0;
  std::list<CallHandle*> calls;  // every call in flight
  // Ends the calls of `run_id` (of `attempt` only, when given).
  void end_calls(const std::string& run_id, std::optional<int> attempt = std::nullopt);
  std::map<std::string, std::vector<std::function<void()>>> idle_waiters;
  std::vector<std::function<void()>> all_idle_waiters;
  bool shutting_down = false;
  ModelMetrics metrics;
  std::optional<SteadyClock::time_point> refusal_logged_at;
  std::uint64_t refused_unlogged = 0;

 private:
  Awaitable<void> accept_loop();
};

// One connection from a child: its requests, one after the other.
Awaitable<void> serve_connection(std::shared_ptr<Hub> hub, Socket socket);

}  // namespace inflight::models
