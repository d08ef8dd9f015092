// The lookups of failure.hpp's word table: the agent's protocol and every
// message read and write these words.
#include "inflight/core/failure.hpp"

namespace inflight {

std::string_view to_string(Failure failure) {
  return word_of(kFailureWords, failure);
}

std::optional<Failure> parse_failure(std::string_view text) {
  return value_of(kFailureWords, text);
}

}  // namespace inflight
