// What a child's request head names before any of it goes upstream: the
// model and the path under /models/NAME, and the attempt's token
// (docs/models.md "Keys and tokens"). Plain functions of the bytes a child
// sent, apart from the listener's event loop, so that a fuzz target
// (tests/fuzz/fuzz_child_request.cpp) reaches them alone.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace inflight::models {

using ChildRequest = boost::beast::http::request<boost::beast::http::string_body>;

// A request head is read within this; its body within --model-max-request-bytes.
inline constexpr std::size_t kMaxChildHeaderBytes = 64 * 1024;

struct CallTarget {
  std::string model;
  std::string path;   // after /models/NAME: "/v1/chat/completions"
  std::string query;  // without '?'
};

// The parts of `/models/NAME[/PATH][?QUERY]`; nullopt for any other target, a NAME that is not a
// model name, or a PATH with a "." or ".." segment (plain or percent-encoded), which would leave
// the model's base path upstream.
std::optional<CallTarget> parse_call_target(std::string_view target);

// The token a child's SDK sends: OpenAI's as a bearer, Anthropic's as x-api-key. A view of the
// request's header: valid while the request lives unchanged.
std::string_view token_of(const ChildRequest& request);

}  // namespace inflight::models
