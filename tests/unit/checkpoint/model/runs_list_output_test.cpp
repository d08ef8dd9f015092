// `inflight runs list`'s output, written field by field by the agent: its JSON is what a json
// value of the same rows prints, so that scripts reading it see no change, and any pod name a
// branch carries still makes valid JSON.
#include "inflight/checkpoint/runs_list_output.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "inflight/checkpoint/agent_protocol.hpp"

namespace inflight::checkpoint {
namespace {

std::vector<RunRow> rows() {
  return {{.id = "r-1",
           .state = "live",
           .pod = "pod-a",
           .attempts = 2,
           .interruptions = 1,
           .failures = 0,
           .records = 7,
           .total = 40,
           .last_checkpoint_at = "2026-11-30T08:00:00Z",
           .finished_at = std::nullopt,
           .where = "inflight/pod-a/r-1"},
          {.id = "r-2",
           .state = "succeeded",
           .pod = "p\"od\\\n",
           .attempts = 1,
           .interruptions = 0,
           .failures = 0,
           .records = 3,
           .total = std::nullopt,
           .last_checkpoint_at = std::nullopt,
           .finished_at = "2026-11-30T09:00:00Z",
           .where = "refs/inflight-results/r-2"}};
}

std::string dumped(const std::vector<RunRow>& runs) {
  OrderedJson list = OrderedJson::array();
  for (const auto& run : runs) {
    OrderedJson row;
    to_json(row, run);
    list.push_back(row);
  }
  return OrderedJson{{"runs", list}}.dump(2) + "\n";
}

TEST(RunsListOutput, JsonIsWhatAJsonValueOfTheRowsPrints) {
  EXPECT_EQ(render_runs(rows(), ListingFormat::json, "", "u"), dumped(rows()));
  EXPECT_EQ(render_runs({}, ListingFormat::json, "", "u"), dumped({}));
  EXPECT_EQ(render_runs(rows(), ListingFormat::json, "succeeded", "u"), dumped({rows()[1]}));
}

TEST(RunsListOutput, APodNameThatIsNotUtf8StillMakesJson) {
  auto runs = rows();
  runs[0].pod = "pod-\xff";
  const auto parsed = OrderedJson::parse(render_runs(runs, ListingFormat::json, "", "u"));
  EXPECT_EQ(parsed["runs"][0]["pod"], "pod-\xef\xbf\xbd");
}

TEST(RunsListOutput, ATableIsPaddedAndAnEmptyOneSaysWhere) {
  EXPECT_EQ(render_runs(rows(), ListingFormat::table, "live", "git://h/r"),
            "RUN ID  STATE  POD    ATTEMPTS  INTERRUPTIONS  FAILURES  RECORDS  LAST CHECKPOINT     "
            "  FINISHED\n"
            "r-1     live   pod-a  2         1              0         7/40     2026-11-30T08:00:00Z"
            "  -\n");
  EXPECT_EQ(render_runs(rows(), ListingFormat::table, "failed", "git://h/r"),
            "no runs failed on git://h/r\n");
  EXPECT_EQ(render_runs({}, ListingFormat::table, "", "git://h/r"), "no runs on git://h/r\n");
}

}  // namespace
}  // namespace inflight::checkpoint
