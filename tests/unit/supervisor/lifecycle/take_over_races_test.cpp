// TakeOverRaces (docs/run.md): a take-over claims again at once
// when the holder's checkpoint won the race, but only so many times in a
// row; without --take-over, or after a failed look, it never races.
#include <gtest/gtest.h>

#include "inflight/supervisor/lifecycle/resume.hpp"

namespace inflight {
namespace {

RestoreResult lost_claim() {
  RestoreResult result;
  result.claims_lost = 1;
  return result;
}

TEST(TakeOverRaces, ALostClaimIsMadeAgainUpToTheBoundThenNoMore) {
  TakeOverRaces races(true);
  for (int i = 0; i < TakeOverRaces::kMaxRaces; ++i)
    EXPECT_TRUE(races.claim_again(lost_claim(), "r1")) << "race " << i;
  EXPECT_FALSE(races.gave_up());
  EXPECT_FALSE(races.claim_again(lost_claim(), "r1"));
  EXPECT_TRUE(races.gave_up());                         // what `inflight run`'s waiting line says
  EXPECT_FALSE(races.claim_again(lost_claim(), "r1"));  // and stays so
}

TEST(TakeOverRaces, NoRaceWithoutTakeOverOrALostClaimOrAfterAFailedLook) {
  TakeOverRaces without(false);
  EXPECT_FALSE(without.claim_again(lost_claim(), "r1"));
  EXPECT_FALSE(without.gave_up());

  TakeOverRaces races(true);
  EXPECT_FALSE(races.claim_again(RestoreResult{}, "r1"));
  auto failed = lost_claim();
  failed.failure = Error{.kind = Failure::unreachable, .message = "down", .candidates = {}};
  EXPECT_FALSE(races.claim_again(failed, "r1"));
}

}  // namespace
}  // namespace inflight
