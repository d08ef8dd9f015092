// See child_request.hpp.
#include "child_request.hpp"

#include "inflight/core/model_specs.hpp"

namespace inflight::models {

namespace {

// "." or "..", spelt plainly or percent-encoded: an upstream resolves it against the model's
// base path, so a child would reach paths beside it with the model's key.
bool is_dot_segment(std::string_view segment) {
  std::string plain;
  for (std::size_t i = 0; i < segment.size(); ++i) {
    if (segment.substr(i, 3) == "%2e" || segment.substr(i, 3) == "%2E") {
      plain += '.';
      i += 2;
    } else {
      plain += segment[i];
    }
  }
  return plain == "." || plain == "..";
}

bool has_dot_segment(std::string_view path) {
  while (!path.empty()) {
    const auto slash = path.find('/');
    if (is_dot_segment(path.substr(0, slash))) return true;
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return false;
}

}  // namespace

std::optional<CallTarget> parse_call_target(std::string_view target) {
  constexpr std::string_view kPrefix = "/models/";
  if (!target.starts_with(kPrefix)) return std::nullopt;
  target.remove_prefix(kPrefix.size());
  const auto query = target.find('?');
  CallTarget parsed;
  if (query != std::string_view::npos) {
    parsed.query = std::string(target.substr(query + 1));
    target = target.substr(0, query);
  }
  const auto slash = target.find('/');
  parsed.model = std::string(target.substr(0, slash));
  parsed.path = slash == std::string_view::npos ? "/" : std::string(target.substr(slash));
  if (!is_model_name(parsed.model) || has_dot_segment(parsed.path)) return std::nullopt;
  return parsed;
}

std::string_view token_of(const ChildRequest& request) {
  const auto bearer = request[boost::beast::http::field::authorization];
  if (bearer.starts_with("Bearer ")) return bearer.substr(7);
  return request["x-api-key"];
}

}  // namespace inflight::models
