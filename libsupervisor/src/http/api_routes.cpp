#include "inflight/supervisor/http/api_routes.hpp"

#include <algorithm>
#include <boost/beast/http.hpp>
#include <charconv>
#include <fstream>
#include <string_view>

#include "http/status_page.hpp"
#include "inflight/core/bounded_json.hpp"

namespace inflight {

namespace http = boost::beast::http;

namespace {

HttpResponse json_response(http::status status, unsigned version, const OrderedJson& body) {
  HttpResponse response{status, version};
  response.set(http::field::content_type, "application/json");
  response.body() = body.dump(-1, ' ', false, OrderedJson::error_handler_t::replace) + "\n";
  return response;
}

HttpResponse error_response(http::status status, unsigned version, std::string_view code,
                            std::string_view message) {
  return json_response(status, version, {{"error", code}, {"message", message}});
}

HttpResponse unavailable(unsigned version, Phase phase) {
  const bool restoring = phase == Phase::restoring;
  auto response = error_response(
      http::status::service_unavailable, version, restoring ? "restoring" : "shutting_down",
      restoring ? "restoring checkpointed runs; retry shortly" : "this instance is shutting down");
  response.set(http::field::retry_after, restoring ? "2" : "5");
  return response;
}

// `/api/eval/status/{id}` → id; `/api/eval/run/{id}/stop` → id.
std::optional<std::string> path_param(std::string_view target, std::string_view prefix,
                                      std::string_view suffix) {
  if (target.size() <= prefix.size() + suffix.size() || !target.starts_with(prefix) ||
      !target.ends_with(suffix))
    return std::nullopt;
  auto id = target.substr(prefix.size(), target.size() - prefix.size() - suffix.size());
  if (id.find('/') != std::string_view::npos) return std::nullopt;
  return std::string(id);
}

// Takes as long whatever the guess, so the token cannot be found byte by byte.
bool same_secret(std::string_view given, std::string_view expected) {
  unsigned char diff = given.size() != expected.size();
  for (std::size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  return diff == 0;
}

OrderedJson nullable(const std::optional<std::string>& value) {
  return value ? OrderedJson(*value) : OrderedJson(nullptr);
}

// The template's `progress_total` for this run's request, null when unknown.
OrderedJson progress_total(const Run& run) {
  const auto total = run.records_expected();
  return total ? OrderedJson(*total) : OrderedJson(nullptr);
}

std::string display_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& arg : argv) {
    const bool plain = !arg.empty() && arg.find_first_of(" \t\n'\"\\$`") == std::string::npos;
    std::string quoted = "'";
    for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += (out.empty() ? "" : " ") + (plain ? arg : quoted + "'");
  }
  return out;
}

OrderedJson model_json(const std::optional<checkpoint::ModelCounts>& counts) {
  return counts ? checkpoint::to_json(*counts) : OrderedJson(nullptr);
}

}  // namespace

ApiRoutes::ApiRoutes(RunSupervisor& supervisor, const ChildReaper& reaper, ApiSettings settings)
    : supervisor_(supervisor), reaper_(reaper), settings_(std::move(settings)) {}

OrderedJson ApiRoutes::status_json(Run& run) {
  const auto* attempt = run.params.attempts.empty() ? nullptr : &run.params.attempts.back();
  const auto spent = checkpoint::spent_budgets(run.params);
  return {{"id", run.id},
          {"status", to_string(run.status())},
          {"command", display_command(run.params.argv)},
          {"attempt", run.attempts()},
          {"interruptions", spent.interruptions},
          {"failures", spent.failures},
          {"started_at", attempt ? OrderedJson(attempt->started_at) : OrderedJson(nullptr)},
          {"finished_at", nullable(run.finished_at)},
          {"exit_code", run.exit_code ? OrderedJson(*run.exit_code) : OrderedJson(nullptr)},
          {"progress", {{"records", run.record_count()}, {"total", progress_total(run)}}},
          {"checkpoint",
           {{"branch", run.checkpoint.branch},
            {"last_at", nullable(run.checkpoint.last_at)},
            {"last_commit", nullable(run.checkpoint.last_commit)},
            {"failing_since", nullable(run.checkpoint.failing_since)},
            {"error", nullable(run.checkpoint.error)}}},
          {"child", run.params.child_name},
          {"model", model_json(run.model_totals())},
          {"error", nullable(run.lifecycle.held() ? std::optional(run.held_reason)
                             : attempt            ? attempt->error
                                                  : std::nullopt)}};
}

HttpRefusals ApiRoutes::refusals() const {
  return {[](unsigned version) {
            return error_response(http::status::payload_too_large, version, "payload_too_large",
                                  "the request body is larger than 1 MiB");
          },
          [](unsigned version) {
            return error_response(http::status::bad_request, version, "bad_request",
                                  "malformed HTTP request");
          },
          [](unsigned version) {
            return error_response(http::status::service_unavailable, version,
                                  "too_many_connections",
                                  "too many open connections; retry shortly");
          }};
}

bool ApiRoutes::authorized(const HttpRequest& request) const {
  if (settings_.api_token.empty()) return true;
  const auto header = request[http::field::authorization];
  return same_secret(std::string_view(header.data(), header.size()),
                     "Bearer " + settings_.api_token);
}

// Every answer says its content type is what it is: a browser opening a log
// (text/plain) or a JSON body must never sniff it into a page.
// A submit may wait for the store (SubmitResult::look_up); every other route answers at once.
void ApiRoutes::handle(const HttpRequest& request, HttpServer::Respond respond) {
  auto send = [respond = std::move(respond)](HttpResponse response) {
    response.set("X-Content-Type-Options", "nosniff");
    respond(std::move(response));
  };
  const std::string_view target(request.target().data(), request.target().size());
  if (target.substr(0, target.find('?')) == "/api/eval/run" &&
      request.method() == http::verb::post && authorized(request))
    return submit(request, std::move(send));
  send(answer(request));
}

HttpResponse ApiRoutes::answer(const HttpRequest& request) {
  const std::string_view target(request.target().data(), request.target().size());
  const auto path = target.substr(0, target.find('?'));
  if (path == "/healthz") return json_response(http::status::ok, request.version(), {{"ok", true}});
  // The page holds no data (its script asks the API, with the token).
  if (path == "/" && request.method() == http::verb::get) return status_page(request.version());
  if (path == "/readyz") {
    if (supervisor_.phase() != Phase::ready)
      return unavailable(request.version(), supervisor_.phase());
    if (const auto& problem = supervisor_.disk_health().problem())
      return error_response(http::status::service_unavailable, request.version(),
                            "cannot_checkpoint", "this disk cannot hold a checkpoint: " + *problem);
    return json_response(http::status::ok, request.version(), {{"ready", true}});
  }
  if (!authorized(request))
    return error_response(http::status::unauthorized, request.version(), "unauthorized",
                          "missing or wrong Authorization: Bearer token");
  return route(request);
}

HttpResponse ApiRoutes::route(const HttpRequest& request) {
  const std::string_view target(request.target().data(), request.target().size());
  const auto path = target.substr(0, target.find('?'));
  const auto method = request.method();
  const auto version = request.version();
  auto wrong_method = [&] {
    return error_response(
        http::status::method_not_allowed, version, "method_not_allowed",
        std::string(request.method_string()) + " is not allowed on " + std::string(path));
  };
  if (path == "/metrics") return method == http::verb::get ? metrics(version) : wrong_method();
  if (path == "/api/eval/run") return wrong_method();  // a POST is handle()'s
  if (path == "/api/eval/runs") {
    if (method != http::verb::get) return wrong_method();
    OrderedJson runs = OrderedJson::array();
    for (const auto& run : supervisor_.runs()) runs.push_back(status_json(*run));
    return json_response(http::status::ok, version, {{"runs", runs}});
  }
  if (auto log_id = path_param(path, "/api/eval/run/", "/log"))
    return method == http::verb::get ? run_log(*log_id, target, version) : wrong_method();
  auto id = path_param(path, "/api/eval/status/", "");
  const bool is_stop = !id && (id = path_param(path, "/api/eval/run/", "/stop"));
  if (!id)
    return error_response(http::status::not_found, version, "not_found",
                          "no route " + std::string(path));
  if (method != (is_stop ? http::verb::post : http::verb::get)) return wrong_method();
  Run* run = supervisor_.find(*id);
  if (!run) return error_response(http::status::not_found, version, "not_found", "no run " + *id);
  if (is_stop) supervisor_.stop(*run);
  return json_response(http::status::ok, version, status_json(*run));
}

namespace {

constexpr std::size_t kMaxLogTailLines = 10'000;
// Whatever N, a response holds at most this much of the log's end.
constexpr std::size_t kMaxLogTailBytes = 8u << 20;

// `?tail=N` of the target: N lines, at most kMaxLogTailLines; the default
// is that many. nullopt for anything else.
std::optional<std::size_t> tail_lines(std::string_view target) {
  const auto query = target.find('?');
  if (query == std::string_view::npos) return kMaxLogTailLines;
  const auto params = target.substr(query + 1);
  if (!params.starts_with("tail=")) return std::nullopt;
  const auto number = params.substr(5);
  std::size_t lines = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), lines);
  if (ec != std::errc{} || end != number.data() + number.size() || lines > kMaxLogTailLines)
    return std::nullopt;
  return lines;
}

// The last `lines` lines of the file, read from its end only (a final
// newline ends the last line; it does not start another).
std::string last_lines(const std::filesystem::path& file, std::size_t lines) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in || lines == 0) return "";
  const auto size = static_cast<std::size_t>(in.tellg());
  const auto take = std::min(size, kMaxLogTailBytes);
  std::string text(take, '\0');
  in.seekg(static_cast<std::streamoff>(size - take));
  in.read(text.data(), static_cast<std::streamsize>(take));
  std::size_t pos = !text.empty() && text.back() == '\n' ? text.size() - 1 : text.size();
  std::size_t start = 0;
  for (std::size_t n = 0; n < lines && pos > 0; ++n) {
    const auto newline = text.rfind('\n', pos - 1);
    if (newline == std::string::npos) {
      start = 0;
      break;
    }
    start = newline + 1;
    pos = newline;
  }
  return text.substr(start);
}

}  // namespace

HttpResponse ApiRoutes::run_log(const std::string& id, std::string_view target, unsigned version) {
  Run* run = supervisor_.find(id);
  if (!run) return error_response(http::status::not_found, version, "not_found", "no run " + id);
  const auto lines = tail_lines(target);
  if (!lines)
    return error_response(
        http::status::bad_request, version, "invalid_param",
        "tail: must be a whole number from 0 to " + std::to_string(kMaxLogTailLines));
  HttpResponse response{http::status::ok, version};
  response.set(http::field::content_type, "text/plain; charset=utf-8");
  response.body() = last_lines(run->dir / "console.log", *lines);
  return response;
}

void ApiRoutes::submit(const HttpRequest& request, HttpServer::Respond respond) {
  const auto version = request.version();
  if (supervisor_.phase() != Phase::ready)
    return respond(unavailable(version, supervisor_.phase()));
  const auto body = parse_bounded_json(request.body(), {});
  if (!body)
    return respond(error_response(http::status::bad_request, version, "invalid_json",
                                  "the request body is " + body.error().message));
  const auto result = supervisor_.submit(*body);
  if (!result.look_up) return respond(submitted(result, version));
  // A run id this pod does not know, on a repo whose history it did not read: published or not,
  // the store says, and the same body is submitted again.
  const auto cannot_check = [version](const std::string& why) {
    auto response = error_response(
        http::status::service_unavailable, version, "cannot_check",
        "whether this run is published cannot be told now (" + why + "); retry later");
    response.set(http::field::retry_after, "5");
    return response;
  };
  auto asked = [this, body = *body, version, respond, cannot_check](std::optional<Error> failure) {
    if (supervisor_.phase() != Phase::ready)
      return respond(unavailable(version, supervisor_.phase()));
    if (failure) return respond(cannot_check(failure->message));
    respond(submitted(supervisor_.submit(body, true), version));
  };
  try {
    supervisor_.look_up(*result.look_up, std::move(asked));
  } catch (const std::exception& e) {  // no agent could be started (out of descriptors)
    respond(cannot_check(e.what()));
  }
}

HttpResponse ApiRoutes::submitted(const SubmitResult& result, unsigned version) {
  if (!result.run) {
    auto response = error_response(static_cast<http::status>(result.http_status), version,
                                   result.error_code, result.message);
    if (result.http_status == 503) response.set(http::field::retry_after, "5");
    return response;
  }
  const auto status = static_cast<http::status>(result.http_status);
  if (status == http::status::ok) return json_response(status, version, status_json(*result.run));
  return json_response(status, version,
                       {{"id", result.run->id},
                        {"status", to_string(result.run->status())},
                        {"command", display_command(result.run->params.argv)}});
}

}  // namespace inflight
