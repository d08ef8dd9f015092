// See child_request.hpp.
#include "child_request.hpp"

#include "inflight/core/model_specs.hpp"

namespace inflight::models {

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
  if (!is_model_name(parsed.model)) return std::nullopt;
  return parsed;
}

std::string token_of(const ChildRequest& request) {
  const auto bearer = request[boost::beast::http::field::authorization];
  if (bearer.starts_with("Bearer ")) return std::string(bearer.substr(7));
  return std::string(request["x-api-key"]);
}

}  // namespace inflight::models
