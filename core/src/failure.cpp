// The one table that spells each Failure: the agent's protocol and every
// message read and write these words.
#include "inflight/core/failure.hpp"

#include "inflight/core/word_table.hpp"

namespace inflight {

namespace {

constexpr WordTable<Failure, 9> kFailureWords{{
    {Failure::other, "other"},
    {Failure::unreachable, "unreachable"},
    {Failure::auth, "auth"},
    {Failure::rejected, "rejected"},
    {Failure::not_found, "not_found"},
    {Failure::hostile_tree, "hostile_tree"},
    {Failure::cache, "cache"},
    {Failure::deadline, "deadline"},
    {Failure::ambiguous, "ambiguous"},
}};

}  // namespace

std::string_view to_string(Failure failure) {
  return word_of(kFailureWords, failure);
}

std::optional<Failure> parse_failure(std::string_view text) {
  return value_of(kFailureWords, text);
}

}  // namespace inflight
