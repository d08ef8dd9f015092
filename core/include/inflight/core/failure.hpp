// The one way an operation that may fail says so (docs/checkpoints.md "The restore limits"): a
// Result holds its value or an Error whose Failure is every kind a caller must tell apart, from
// libgit2's failures in the checkpoint store through the checkpoint agent's answer to the
// supervisor and the commands. Expected outcomes (a rejected push, a branch not found, a lost
// claim, an ambiguous run id) are values on every call; exceptions are left for bugs and for the
// few errors caught once at the top of a program.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "inflight/core/word_table.hpp"

namespace inflight {

enum class Failure {
  other,        // anything else: exit 1
  unreachable,  // connection refused, DNS, TLS, timeout: exit 3
  auth,         // credentials refused: exit 3, and no retry will help
  rejected,     // a ref update lost a race: another instance owns the run
  // the server refused a ref update by its own rule (a hook, a permission, a
  // quota): not landed, to retry; nobody else owns the run
  refused,
  not_found,     // no such branch or object: exit 4
  hostile_tree,  // a tree that would write outside its run dir, or is too big
  cache,         // this disk's cache repo cannot be opened or written
  deadline,      // the checkpoint agent was killed at its deadline
  ambiguous,     // a run id that several pods' branches carry
  // a run dir that, once what a restore would refuse is left out, still
  // holds more than a restore takes (docs/checkpoints.md "The restore limits")
  over_limit,
};

// The one table that spells each kind, on the agent's wire, in messages and
// as /metrics labels: read both ways by to_string and parse_failure.
inline constexpr WordTable<Failure, 11> kFailureWords{{
    {Failure::other, "other"},
    {Failure::unreachable, "unreachable"},
    {Failure::auth, "auth"},
    {Failure::rejected, "rejected"},
    {Failure::refused, "refused"},
    {Failure::not_found, "not_found"},
    {Failure::hostile_tree, "hostile_tree"},
    {Failure::cache, "cache"},
    {Failure::deadline, "deadline"},
    {Failure::ambiguous, "ambiguous"},
    {Failure::over_limit, "over_limit"},
}};

// The word the checkpoint agent's protocol carries for each kind.
std::string_view to_string(Failure failure);
// nullopt for any word the table does not hold.
std::optional<Failure> parse_failure(std::string_view text);

// A failure of the connection itself, not of one ref: every ref's.
constexpr bool network_failure(Failure failure) {
  return failure == Failure::unreachable || failure == Failure::auth;
}

struct Error {
  Failure kind = Failure::other;
  std::string message;
  // ambiguous: every name the request could mean, for the caller to pick one.
  std::vector<std::string> candidates;
};

// A value of T, or the Error that stopped it (tl::expected's shape, with one
// error type). Both convert implicitly, so a function returns either.
template <class T>
class Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}

  bool has_value() const { return state_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& operator*() { return std::get<0>(state_); }
  const T& operator*() const { return std::get<0>(state_); }
  T* operator->() { return &std::get<0>(state_); }
  const T* operator->() const { return &std::get<0>(state_); }
  T& value() { return std::get<0>(state_); }
  const T& value() const { return std::get<0>(state_); }

  const Error& error() const { return std::get<1>(state_); }
  // Whether it holds an Error of that kind.
  bool failed_with(Failure kind) const { return !has_value() && error().kind == kind; }

 private:
  std::variant<T, Error> state_;
};

// Success that carries nothing, or the Error.
template <>
class Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}

  bool has_value() const { return !error_.has_value(); }
  explicit operator bool() const { return has_value(); }
  const Error& error() const { return *error_; }
  bool failed_with(Failure kind) const { return error_ && error_->kind == kind; }

 private:
  std::optional<Error> error_;
};

}  // namespace inflight
