// The word tables of enums: both lookups read one table, and a word the table
// does not hold is no value at all.
#include "inflight/core/word_table.hpp"

#include <gtest/gtest.h>

#include "inflight/core/failure.hpp"

namespace inflight {
namespace {

enum class Colour { red, green };
constexpr WordTable<Colour, 2> kColours{{{Colour::red, "red"}, {Colour::green, "green"}}};

TEST(WordTable, ReadsOneTableBothWays) {
  static_assert(word_of(kColours, Colour::green) == "green");
  static_assert(value_of(kColours, "red") == Colour::red);
  EXPECT_EQ(value_of(kColours, word_of(kColours, Colour::red)), Colour::red);
}

TEST(WordTable, AWordTheTableLacksIsNoValue) {
  EXPECT_FALSE(value_of(kColours, "Red").has_value());
  EXPECT_FALSE(value_of(kColours, "").has_value());
  EXPECT_FALSE(value_of(kColours, "red ").has_value());
}

TEST(WordTable, EveryFailureHasAWordThatReadsBack) {
  for (auto kind : {Failure::other, Failure::unreachable, Failure::auth, Failure::rejected,
                    Failure::not_found, Failure::hostile_tree, Failure::cache, Failure::deadline,
                    Failure::ambiguous, Failure::over_limit}) {
    ASSERT_FALSE(to_string(kind).empty());
    EXPECT_EQ(parse_failure(to_string(kind)), kind);
  }
}

}  // namespace
}  // namespace inflight
