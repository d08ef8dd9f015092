// Enums written as words (on the agent's wire, in commit messages, in
// run-params.json, in listings): each has one table of value and word, and
// these two lookups read it both ways, so no word is spelt twice.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace inflight {

template <class Enum, std::size_t N>
using WordTable = std::array<std::pair<Enum, std::string_view>, N>;

// The word of `value`; empty only for a value the table lacks.
template <class Enum, std::size_t N>
constexpr std::string_view word_of(const WordTable<Enum, N>& table, Enum value) {
  for (const auto& [entry, word] : table)
    if (entry == value) return word;
  return {};
}

// The value spelt `word`; nullopt for any text the table does not hold.
template <class Enum, std::size_t N>
constexpr std::optional<Enum> value_of(const WordTable<Enum, N>& table, std::string_view word) {
  for (const auto& [entry, spelling] : table)
    if (spelling == word) return entry;
  return std::nullopt;
}

}  // namespace inflight
