// The one table that spells each Failure: the agent's protocol and every
// message read and write these words.
#include "inflight/core/failure.hpp"

#include <array>

namespace inflight {

namespace {

constexpr std::array<std::pair<Failure, std::string_view>, 9> kFailureWords{{
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
  for (const auto& [value, word] : kFailureWords)
    if (value == failure) return word;
  return "other";
}

std::optional<Failure> parse_failure(std::string_view text) {
  for (const auto& [value, word] : kFailureWords)
    if (word == text) return value;
  return std::nullopt;
}

}  // namespace inflight
