// One model call of a child, once the listener admitted it: answered from
// the attempt's journal when it holds the answer, else sent upstream with
// the model's key, its answer streamed back to the child while it is
// recorded (docs/models.md "What is replayed").
#pragma once

#include <boost/beast/http.hpp>
#include <memory>

#include "child_request.hpp"
#include "hub.hpp"
#include "loop.hpp"

namespace inflight::models {

// Whether the child's connection may carry its next request.
Awaitable<bool> answer_call(std::shared_ptr<Hub> hub, std::shared_ptr<Attempt> attempt,
                            Stream& child, ChildRequest request, CallTarget target);

// A JSON error the child's SDK can read: {"error": {"message", "type", "code"}}.
boost::beast::http::response<boost::beast::http::string_body> error_answer(unsigned status,
                                                                           std::string_view code,
                                                                           std::string_view message,
                                                                           unsigned version);

}  // namespace inflight::models
