// A child's request to the model listener on any bytes: read by Beast's
// parser within the listener's limits, then the target and the token that
// admit it (child_request.hpp). Children are untrusted. A target is read
// only when it is /models/NAME with a model name, and its parts put back
// together give the target again.
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "child_request.hpp"
#include "inflight/core/model_specs.hpp"

namespace http = boost::beast::http;
using namespace inflight::models;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(kMaxChildHeaderBytes);
  parser.body_limit(1 << 20);
  parser.eager(true);
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(data, size), ec);
  if (!parser.is_header_done()) return 0;
  const auto& request = parser.get();
  token_of(request);
  const std::string_view target = request.target();
  const auto call = parse_call_target(target);
  if (!call) return 0;
  if (!inflight::is_model_name(call->model) || !call->path.starts_with('/')) std::abort();
  const auto path = target.substr(8 + call->model.size()).starts_with('/') ? call->path : "";
  const auto query = target.find('?') != std::string_view::npos ? "?" + call->query : "";
  if ("/models/" + call->model + path + query != target) std::abort();
  return 0;
}
