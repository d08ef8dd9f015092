// A model call's identity for replay (SPEC §13 "Replay"): a later attempt's request is answered
// from the journal only when it is the same question, so the parts that can change an answer
// (model, method, path, query, the headers that select API behaviour, the body as JSON means it)
// go into one digest, and what cannot (key order, whitespace, `ignore_fields`) does not.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inflight::models {

// The parts of a request that make its identity for replay (SPEC §13 "Replay").
struct RequestParts {
  std::string model;   // the config's model name
  std::string method;  // "POST"
  std::string path;    // after /models/NAME, starting with '/', without the query
  std::string query;   // without '?', as sent; empty when none
  // Lower-cased names of the headers that change an answer, as sent: anthropic-version,
  // anthropic-beta, openai-beta (only those present, in this order).
  std::vector<std::pair<std::string, std::string>> identity_headers;
  // The request's own body, which must outlive the parts: a 32 MiB body is
  // not copied for its identity.
  std::string_view body;
};

// The body as compared: when it parses as JSON (bounded: its own size, depth 64), keys sorted, no
// whitespace, each of `ignore_fields` (JSON pointers such as "/metadata/user_id"; one that does
// not resolve, is not a valid pointer, or is the whole document "" is skipped) removed, in the
// order given; otherwise (not JSON, not UTF-8, multipart) the bytes themselves.
std::string canonical_body(std::string_view body, const std::vector<std::string>& ignore_fields);

// SHA-256 in lower-case hex (64 characters) of an unambiguous encoding of model, method, path,
// query, identity headers and canonical body: each part length-prefixed, so that no two
// different requests encode alike.
std::string request_digest(const RequestParts& parts,
                           const std::vector<std::string>& ignore_fields);

}  // namespace inflight::models
