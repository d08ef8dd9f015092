// The trust boundary of docs/security.md "What runs is decided by the config": the configured
// templates decide what runs; a run (from a branch or a disk) only names one and carries its
// request.
#include "inflight/core/child_templates.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "inflight/core/program_path.hpp"
#include "temp_dir.hpp"

namespace inflight {
namespace {

OrderedJson config() {
  return OrderedJson::parse(R"({
    "child": {"argv": ["true", "{output_dir}"], "progress_file": "out/index.jsonl"},
    "children": {
      "agentv": {
        "argv": ["agentv", "eval", "{suite}"],
        "params": {"suite": {"type": "string", "required": true, "pattern": "^[a-z/.]+$"}},
        "progress_file": "index.jsonl"
      }
    }
  })");
}

checkpoint::RunParams run_of(const std::string& child_name, OrderedJson request) {
  checkpoint::RunParams params;
  params.run_id = "r-1";
  params.child_name = child_name;
  params.request = std::move(request);
  // What a hostile branch may say: it is never read.
  params.child = {{"argv", {"/bin/sh", "-c", "touch /tmp/pwned"}}, {"progress_file", "/etc/x"}};
  return params;
}

std::string config_error(const OrderedJson& file) {
  try {
    ChildTemplates::from_config(file, "/x/inflight-demo-eval");
    return "<accepted>";
  } catch (const ConfigError& e) {
    return e.what();
  }
}

TEST(ChildTemplates, JudgesARunByItsNamedConfiguredTemplateOnly) {
  const auto templates = ChildTemplates::from_config(config(), "/x/inflight-demo-eval");
  EXPECT_EQ(templates.names(), "agentv, default");
  const auto ok = templates.judge(run_of("agentv", {{"suite", "evals/a.yaml"}}));
  EXPECT_FALSE(ok.refusal.has_value());
  EXPECT_EQ(ok.progress_file, "index.jsonl");  // the configured one, not the branch's
  const auto unknown = templates.judge(run_of("promptfoo", OrderedJson::object()));
  ASSERT_TRUE(unknown.refusal.has_value());
  EXPECT_NE(unknown.refusal->find("no child template named 'promptfoo'"), std::string::npos);
  const auto missing = templates.judge(run_of("agentv", OrderedJson::object()));
  ASSERT_TRUE(missing.refusal.has_value());
  EXPECT_NE(missing.refusal->find("suite: is required"), std::string::npos);
  const auto injected = templates.judge(run_of("agentv", {{"suite", "$(id)"}}));
  EXPECT_TRUE(injected.refusal.has_value());
  const auto undeclared = templates.judge(run_of("default", {{"x", 1}}));
  EXPECT_TRUE(undeclared.refusal.has_value());
}

TEST(ChildTemplates, WithoutAConfigTheDemoIsTheDefault) {
  const auto templates = ChildTemplates::from_config(OrderedJson::object(), "/x/demo");
  EXPECT_EQ(templates.find("default")->programs(), std::vector<std::string>{"/x/demo"});
  EXPECT_EQ(templates.find("default")->digest().rfind("fnv1a64:", 0), 0u);
}

TEST(ChildTemplates, RefusesUnsafeConfigNamingTheKey) {
  auto with = [](const char* key, OrderedJson value) {
    auto file = OrderedJson::parse(R"({"child": {"argv": ["true"]}})");
    file["child"][key] = std::move(value);
    return config_error(file);
  };
  for (const auto* path : {"/etc/x", "../x", "a/../../x", "./x", "a/"})
    EXPECT_NE(with("progress_file", path).find("child.progress_file"), std::string::npos) << path;
  EXPECT_EQ(with("progress_file", "out/index.jsonl"), "<accepted>");
  EXPECT_NE(with("env", {{"TOKEN", "${INFLIGHT_API_TOKEN}"}}).find("INFLIGHT_API_TOKEN"),
            std::string::npos);
  EXPECT_NE(with("env", {{"A=B", "x"}}).find("child.env.A=B"), std::string::npos);
  EXPECT_EQ(with("env", {{"OPENAI_API_KEY", "${OPENAI_API_KEY}"}}), "<accepted>");
  EXPECT_NE(with("params", {{"child", {{"type", "string"}}}}).find("child.params.child"),
            std::string::npos);
  EXPECT_NE(with("params", {{"p", {{"type", "string"}, {"pattern", std::string(2000, '(')}}}})
                .find("longer than"),
            std::string::npos);
  auto clash = config();
  clash["children"]["default"] = {{"argv", {"true"}}};
  EXPECT_NE(config_error(clash).find("children.default"), std::string::npos);
  auto bad_name = config();
  bad_name["children"]["a/b"] = {{"argv", {"true"}}};
  EXPECT_NE(config_error(bad_name).find("children.a/b"), std::string::npos);
}

TEST(ChildTemplates, DigestIgnoresKeyOrderAndNoticesChanges) {
  const auto a = ChildTemplate::parse(OrderedJson::parse(R"({"argv": ["x"], "cwd": "/"})"));
  const auto b = ChildTemplate::parse(OrderedJson::parse(R"({"cwd": "/", "argv": ["x"]})"));
  const auto c = ChildTemplate::parse(OrderedJson::parse(R"({"cwd": "/", "argv": ["y"]})"));
  EXPECT_EQ(a.digest(), b.digest());
  EXPECT_NE(a.digest(), c.digest());
}

TEST(ProgramProblem, NamesAMissingOrNonExecutableProgram) {
  TempDir dir;
  EXPECT_FALSE(program_problem("true", dir.path()).has_value());
  const auto missing = program_problem("agentv-typo", dir.path());
  ASSERT_TRUE(missing.has_value());
  EXPECT_NE(missing->find("cannot start agentv-typo: not found on PATH"), std::string::npos);
  { std::ofstream(dir.path() / "script") << "#!/bin/sh\n"; }
  EXPECT_NE(program_problem("./script", dir.path())->find("not executable"), std::string::npos);
  EXPECT_NE(program_problem("./nope", dir.path())->find("is not a file"), std::string::npos);
  auto file = OrderedJson::parse(R"({"children": {"x": {"argv": ["agentv-typo"]}}})");
  try {
    ChildTemplates::from_config(file, "").check_programs();
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "children.x.argv");
  }
  auto resume =
      OrderedJson::parse(R"({"child": {"argv": ["true"], "resume": {"argv": ["nope-retry"]}}})");
  try {
    ChildTemplates::from_config(resume, "").check_programs();
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "child.resume.argv");
  }
}

}  // namespace
}  // namespace inflight
