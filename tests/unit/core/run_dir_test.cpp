#include "inflight/core/run_dir.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "inflight/core/run_params.hpp"
#include "temp_dir.hpp"

namespace inflight::checkpoint {
namespace {

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

// docs/serve.md "The two budgets": what each attempt's outcome spends.
TEST(SpentBudgets, CountOwnFailuresAndInterruptionsApart) {
  RunParams params;
  for (const char* outcome : {"interrupted", "crashed", "deferred", "interrupted", "", "failed"}) {
    AttemptRecord attempt;
    if (*outcome) attempt.outcome = outcome;
    params.attempts.push_back(attempt);
  }
  // The attempt whose end nobody recorded counts once a later one started.
  EXPECT_EQ(spent_budgets(params).failures, 3);
  EXPECT_EQ(spent_budgets(params).interruptions, 2);
  params.attempts.back().outcome.reset();  // the running attempt counts for neither
  EXPECT_EQ(spent_budgets(params).failures, 3);
}

TEST(RepairTornLine, DropsOnlyAnUnterminatedLastLine) {
  TempDir dir;
  const auto file = dir.path() / "index.jsonl";
  write(file, "{\"a\":1}\n{\"b\":2}\n{\"c\":");
  EXPECT_EQ(repair_torn_line(dir.path(), "index.jsonl"), 5u);
  EXPECT_EQ(read(file), "{\"a\":1}\n{\"b\":2}\n");
  EXPECT_EQ(repair_torn_line(dir.path(), "index.jsonl"), 0u);
  EXPECT_EQ(read(file), "{\"a\":1}\n{\"b\":2}\n");
}

TEST(RepairTornLine, HandlesAFileWithNoNewlineAndAMissingFile) {
  TempDir dir;
  const auto file = dir.path() / "index.jsonl";
  EXPECT_EQ(repair_torn_line(dir.path(), "index.jsonl"), 0u);
  write(file, std::string(10000, 'x'));
  EXPECT_EQ(repair_torn_line(dir.path(), "index.jsonl"), 10000u);
  EXPECT_EQ(read(file), "");
}

TEST(RecordCounter, CountsCompleteLinesIncrementally) {
  TempDir dir;
  const auto file = dir.path() / "index.jsonl";
  RecordCounter counter;
  EXPECT_EQ(counter.count(dir.path(), "index.jsonl"), 0u);
  write(file, "a\nb\nc");
  EXPECT_EQ(counter.count(dir.path(), "index.jsonl"), 2u);
  std::ofstream(file, std::ios::app) << "\nd\n";
  EXPECT_EQ(counter.count(dir.path(), "index.jsonl"), 4u);
  write(file, "x\n");  // rewritten shorter
  EXPECT_EQ(counter.count(dir.path(), "index.jsonl"), 1u);
}

// agentv rewrites index.jsonl in place at the end of a run: same inode,
// truncated, longer lines. The count must be that of the file as it is.
TEST(RecordCounter, RecountsAFileRewrittenInPlace) {
  TempDir dir;
  const auto file = dir.path() / "index.jsonl";
  std::string short_lines, long_lines;
  for (int i = 0; i < 20; ++i) {
    short_lines += "{\"test_id\":\"t" + std::to_string(i) + "\"}\n";
    long_lines += "{\"test_id\":\"t" + std::to_string(i) + "\",\"score\":1,\"detail\":\"" +
                  std::string(40, 'x') + "\"}\n";
  }
  write(file, short_lines);
  RecordCounter counter;
  EXPECT_EQ(counter.count(dir.path(), "index.jsonl"), 20u);
  { std::ofstream(file, std::ios::in | std::ios::out | std::ios::trunc) << long_lines; }
  EXPECT_EQ(counter.count(dir.path(), "index.jsonl"), 20u);
  std::ofstream(file, std::ios::app) << "{\"test_id\":\"t20\"}\n";
  EXPECT_EQ(counter.count(dir.path(), "index.jsonl"), 21u);
}

// A periodic tick skips the push when this is unchanged, so it must change
// with every write a checkpoint would carry and stay put otherwise.
TEST(StatSignature, ChangesWithContentNotWithReads) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "sub");
  write(dir.path() / "index.jsonl", "a\n");
  write(dir.path() / "sub" / "result.json", "{}");
  const auto first = stat_signature(dir.path());
  EXPECT_EQ(read(dir.path() / "index.jsonl"), "a\n");
  EXPECT_EQ(stat_signature(dir.path()), first);

  std::ofstream(dir.path() / "index.jsonl", std::ios::app) << "b\n";
  const auto appended = stat_signature(dir.path());
  EXPECT_NE(appended, first);
  write(dir.path() / "sub" / "new.json", "{}");
  const auto added = stat_signature(dir.path());
  EXPECT_NE(added, appended);
  std::filesystem::remove(dir.path() / "sub" / "new.json");
  EXPECT_NE(stat_signature(dir.path()), added);
}

TEST(RunParams, RoundTripsThroughTheRunDir) {
  TempDir dir;
  RunParams params;
  params.run_id = "r-1";
  params.request = {{"suite_filter", "evals/a.yaml"}, {"workers", 2}};
  params.child = {{"argv", {"agentv", "{suite_filter}"}}, {"resume_argv", {"--resume"}}};
  params.argv = {"agentv", "evals/a.yaml"};
  params.cwd = "/srv";
  params.origin_pod = "pod-a";
  params.created_at = "2026-11-21T10:15:00Z";
  params.attempts.push_back({.attempt = 1,
                             .pod = "pod-a",
                             .started_at = "2026-11-21T10:15:01Z",
                             .ended_at = "2026-11-21T10:16:00Z",
                             .exit_code = 143,
                             .outcome = "interrupted"});
  params.attempts.push_back({.attempt = 2, .pod = "pod-b", .started_at = "2026-11-21T10:17:00Z"});
  write_run_params(dir.path(), params);

  const auto back = read_run_params(dir.path());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(to_json(*back), to_json(params));
  EXPECT_EQ(back->attempts[0].exit_code, 143);
  EXPECT_FALSE(back->attempts[1].outcome.has_value());
  // Declaration order of the template is kept (optional groups depend on it).
  EXPECT_EQ(back->child.begin().key(), "argv");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / ".run-params.json.tmp"));
}

TEST(RunParams, AnAttemptErrorIsKeptAndBounded) {
  TempDir dir;
  RunParams params;
  params.run_id = "r-1";
  params.child = {{"argv", {"agentv-typo"}}};
  params.argv = {"agentv-typo"};
  params.origin_pod = "pod-a";
  params.attempts.push_back({.attempt = 1,
                             .pod = "pod-a",
                             .started_at = "t",
                             .exit_code = 127,
                             .outcome = "failed",
                             .error = "cannot start agentv-typo: No such file or directory"});
  write_run_params(dir.path(), params);
  EXPECT_EQ(read_run_params(dir.path())->attempts[0].error, params.attempts[0].error);
  auto json = to_json(params);
  json["attempts"][0]["error"] = std::string(kMaxAttemptErrorBytes + 1, 'x');
  EXPECT_THROW(run_params_from_json(json), std::runtime_error);
}

TEST(RunParams, MalformedFileNamesTheProblem) {
  TempDir dir;
  write(dir.path() / kRunParamsFile, "{\"version\":1}");
  try {
    read_run_params(dir.path());
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("run-params.json"), std::string::npos);
  }
  EXPECT_FALSE(read_run_params(dir.path() / "missing").has_value());
}

// A symlink planted as the progress file (or a directory on its way) must
// not lead a repair or a count outside the run dir.
TEST(ProgressFile, PlantedSymlinksAreNotFollowed) {
  TempDir dir;
  const auto outside = dir.path() / "outside.txt";
  write(outside, "kept\ntorn");
  const auto run = dir.path() / "run";
  std::filesystem::create_directories(run);
  std::filesystem::create_symlink(outside, run / "index.jsonl");
  std::filesystem::create_directory_symlink(dir.path(), run / "sub");
  EXPECT_THROW(repair_torn_line(run, "index.jsonl"), std::system_error);
  EXPECT_THROW(repair_torn_line(run, "sub/outside.txt"), std::system_error);
  EXPECT_EQ(read(outside), "kept\ntorn");
  EXPECT_EQ(RecordCounter().count(run, "index.jsonl"), 0u);
  EXPECT_EQ(RecordCounter().count(run, "sub/outside.txt"), 0u);
  EXPECT_FALSE(open_in_run_dir(run, "../outside.txt", O_RDONLY));
}

TEST(WriteFileAtomically, ReplacesAPlantedTempSymlinkInsteadOfWritingThroughIt) {
  TempDir dir;
  const auto outside = dir.path() / "outside.txt";
  write(outside, "kept");
  std::filesystem::create_symlink(outside, dir.path() / ".run-params.json.tmp");
  write_file_atomically(dir.path() / "run-params.json", "new");
  EXPECT_EQ(read(outside), "kept");
  EXPECT_EQ(read(dir.path() / "run-params.json"), "new");
}

RunParams valid_params() {
  RunParams params;
  params.run_id = "r-1";
  params.origin_pod = "pod-a";
  params.created_at = "2026-11-21T10:15:00Z";
  return params;
}

// The reason a run-params.json text is refused, or "<accepted>".
std::string refusal(const std::string& text) {
  try {
    run_params_from_text(text);
    return "<accepted>";
  } catch (const std::runtime_error& e) {
    return e.what();
  }
}

TEST(RunParams, FromOutsideIsBoundedAndChecked) {
  const auto good = to_json(valid_params());
  EXPECT_EQ(refusal(good.dump()), "<accepted>");
  auto deep = good;
  deep["request"] = {
      {"x", nlohmann::ordered_json::parse(std::string(100, '[') + std::string(100, ']'))}};
  EXPECT_NE(refusal(deep.dump()).find("nested deeper than 64"), std::string::npos);
  EXPECT_NE(refusal(std::string(60000, '[')).find("nested deeper"), std::string::npos);
  auto big = good;
  big["argv"] = std::vector<std::string>(2, std::string(kMaxRunParamsBytes, 'x'));
  EXPECT_NE(refusal(big.dump()).find("larger than"), std::string::npos);
  for (const auto& [field, value] : std::vector<std::pair<std::string, std::string>>{
           {"run_id", "../etc"}, {"origin_pod", "a/b"}, {"created_at", std::string(300, 'x')}}) {
    auto bad = good;
    bad[field] = value;
    EXPECT_NE(refusal(bad.dump()).find(field), std::string::npos) << field;
  }
  auto many = good;
  many["attempts"] = nlohmann::ordered_json::array();
  for (int i = 0; i <= 1000; ++i)
    many["attempts"].push_back({{"attempt", i}, {"pod", "p"}, {"started_at", "t"}});
  EXPECT_NE(refusal(many.dump()).find("attempts"), std::string::npos);
  EXPECT_NE(refusal("{\"version\":1,\"run_id\":\"\xff\"}").find("UTF-8"), std::string::npos);
  // Written before templates had names: the default template.
  auto old = good;
  old.erase("child_name");
  EXPECT_EQ(run_params_from_text(old.dump()).child_name, "default");
}

// An int field is a JSON integer within int's range: a float is refused, never cast (one beyond
// int's range cast to int is undefined behaviour; the fuzz target found a version of 7.8e42).
TEST(RunParams, AnIntFieldIsAWholeNumberWithinRange) {
  const auto good = to_json(valid_params());
  for (const auto& version : {"7.8e42", "1.0", "4294967297", "-1e300"})
    EXPECT_NE(refusal(std::string(good.dump())
                          .replace(good.dump().find("\"version\":1"), 11,
                                   std::string("\"version\":") + version))
                  .find("version is not a whole number"),
              std::string::npos)
        << version;
  for (const auto& field : {"attempt", "exit_code", "signal"}) {
    auto bad = good;
    bad["attempts"] = {{{"attempt", 1}, {"pod", "p"}, {"started_at", "t"}}};
    bad["attempts"][0][field] = 1e300;
    EXPECT_NE(refusal(bad.dump()).find(std::string(field) + " is not a whole number"),
              std::string::npos)
        << field;
  }
}

}  // namespace
}  // namespace inflight::checkpoint
