#include "inflight/core/child_template.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <utility>
#include <vector>

namespace inflight {
namespace {

using Argv = std::vector<std::string>;

// The example template of docs/serve.md "The config file and the child templates", parsed with its
// declaration order kept.
OrderedJson spec_child() {
  return OrderedJson::parse(R"({
    "argv": ["agentv", "eval", "run", "{suite_filter}", "--output", "{output_dir}"],
    "optional": {
      "target":   ["--target", "{target}"],
      "workers":  ["--workers", "{workers}"],
      "test_ids": ["--test-id", "{test_ids}"]
    },
    "resume_argv": ["--resume"],
    "cwd": ".",
    "env": {"AGENTV_NO_UPDATE_CHECK": "1"},
    "params": {
      "suite_filter": {"type": "string", "required": true, "pattern": "^[A-Za-z0-9_./,*-]+$"},
      "target":       {"type": "string", "pattern": "^[A-Za-z0-9_.-]+$"},
      "workers":      {"type": "integer", "min": 1, "max": 64},
      "test_ids":     {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z0-9_.:-]+$"}}
    },
    "progress_file": "index.jsonl"
  })");
}

ChildTemplate spec_template() {
  return ChildTemplate::parse(spec_child());
}

RenderContext context(bool resume = false) {
  RenderContext c;
  c.run_id = "r-20240101-abc";
  c.output_dir = "/runs/r-20240101-abc";
  c.attempt = 2;
  c.resume = resume;
  return c;
}

OrderedJson request(const char* text) {
  return OrderedJson::parse(text);
}

// The param named by the refusal of `body`, or "<accepted>".
std::string refused_param(const ChildTemplate& t, const OrderedJson& body) {
  const auto error = t.validate(body);
  return error ? error->param : "<accepted>";
}

// ---------------------------------------------------------------- validation

// `inflight run --param KEY=VALUE`: each value typed as its param declares.
TEST(ChildTemplateParamWords, TypeEachValueAsItsParamIsDeclared) {
  const auto t = spec_template();
  OrderedJson body = OrderedJson::object();
  for (const char* word :
       {"suite_filter=evals/a.yaml", "workers=8", "test_ids=t-1", "test_ids=t-2"})
    EXPECT_FALSE(t.add_param_word(body, word)) << word;
  EXPECT_EQ(body, request(R"({"suite_filter": "evals/a.yaml", "workers": 8,
                              "test_ids": ["t-1", "t-2"]})"));
  EXPECT_FALSE(t.validate(body));
  // The value is all that follows the first '='; validate() judges it.
  EXPECT_FALSE(t.add_param_word(body, "target=x=y"));
  EXPECT_EQ(body["target"], "x=y");
}

TEST(ChildTemplateParamWords, RefuseWhatIsNotAParamOfItsType) {
  const auto t = spec_template();
  OrderedJson body = OrderedJson::object();
  const std::pair<const char*, const char*> refused[] = {{"bogus=1", "bogus"},
                                                         {"workers=eight", "workers"},
                                                         {"workers=8x", "workers"},
                                                         {"=1", "=1"},
                                                         {"workers", "workers"}};
  for (const auto& [word, param] : refused) {
    const auto error = t.add_param_word(body, word);
    ASSERT_TRUE(error) << word;
    EXPECT_EQ(error->param, param) << word;
  }
  EXPECT_FALSE(t.add_param_word(body, "workers=2"));
  EXPECT_EQ(t.add_param_word(body, "workers=3")->message,
            "is given twice (only an array param repeats)");
}

TEST(ChildTemplateValidate, AcceptsAFullValidRequest) {
  const auto t = spec_template();
  EXPECT_FALSE(t.validate(request(R"({"suite_filter": "core/*.yaml", "target": "gpt-4o",
                                      "workers": 8, "test_ids": ["a.b:1", "c-2"]})"))
                   .has_value());
  EXPECT_FALSE(t.validate(request(R"({"suite_filter": "core"})")).has_value());
}

TEST(ChildTemplateValidate, RefusesAnUndeclaredParamNamingIt) {
  const auto t = spec_template();
  EXPECT_EQ(refused_param(t, request(R"({"suite_filter": "core", "shell": "sh"})")), "shell");
}

TEST(ChildTemplateValidate, RefusesAMissingRequiredParamNamingIt) {
  const auto t = spec_template();
  EXPECT_EQ(refused_param(t, OrderedJson::object()), "suite_filter");
  EXPECT_EQ(refused_param(t, request(R"({"target": "gpt"})")), "suite_filter");
}

TEST(ChildTemplateValidate, RefusesANonObjectRequest) {
  const auto t = spec_template();
  EXPECT_TRUE(t.validate(request(R"(["suite_filter"])")).has_value());
  EXPECT_TRUE(t.validate(request("\"core\"")).has_value());
}

TEST(ChildTemplateValidate, RefusesAValueOfTheWrongTypeNamingTheParam) {
  const auto t = spec_template();
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"suite_filter": 5})", "suite_filter"},
      {R"({"suite_filter": ["core"]})", "suite_filter"},
      {R"({"suite_filter": null})", "suite_filter"},
      {R"({"suite_filter": "core", "target": {"a": 1}})", "target"},
      {R"({"suite_filter": "core", "workers": "8"})", "workers"},
      {R"({"suite_filter": "core", "workers": 2.5})", "workers"},
      {R"({"suite_filter": "core", "workers": 8.0})", "workers"},
      {R"({"suite_filter": "core", "workers": true})", "workers"},
      {R"({"suite_filter": "core", "workers": [8]})", "workers"},
      {R"({"suite_filter": "core", "test_ids": "a"})", "test_ids"},
      {R"({"suite_filter": "core", "test_ids": [1]})", "test_ids"},
      {R"({"suite_filter": "core", "test_ids": [["a"]]})", "test_ids"},
  };
  for (const auto& c : cases) EXPECT_EQ(refused_param(t, request(c.body)), c.param) << c.body;
}

TEST(ChildTemplateValidate, EnforcesIntegerBounds) {
  const auto t = spec_template();
  EXPECT_EQ(refused_param(t, request(R"({"suite_filter": "c", "workers": 0})")), "workers");
  EXPECT_EQ(refused_param(t, request(R"({"suite_filter": "c", "workers": -3})")), "workers");
  EXPECT_EQ(refused_param(t, request(R"({"suite_filter": "c", "workers": 65})")), "workers");
  EXPECT_EQ(refused_param(t, request(R"({"suite_filter": "c", "workers": 18446744073709551615})")),
            "workers");
  EXPECT_EQ(refused_param(t, request(R"({"suite_filter": "c", "workers": 1})")), "<accepted>");
  EXPECT_EQ(refused_param(t, request(R"({"suite_filter": "c", "workers": 64})")), "<accepted>");
}

TEST(ChildTemplateValidate, RefusesAStringFailingItsPattern) {
  const auto t = spec_template();
  EXPECT_EQ(refused_param(t, request(R"({"suite_filter": "core suite"})")), "suite_filter");
  EXPECT_EQ(refused_param(t, request(R"({"suite_filter": "core;id"})")), "suite_filter");
  EXPECT_EQ(refused_param(t, request(R"({"suite_filter": ""})")), "suite_filter");
  EXPECT_EQ(refused_param(t, request(R"({"suite_filter": "c", "target": "a/b"})")), "target");
}

TEST(ChildTemplateValidate, RefusesAnArrayItemFailingItsPattern) {
  const auto t = spec_template();
  const auto error = t.validate(request(R"({"suite_filter": "c", "test_ids": ["ok", "not ok"]})"));
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->param, "test_ids");
  EXPECT_NE(error->message.find("item 1"), std::string::npos) << error->message;
}

TEST(ChildTemplateValidate, RefusesALeadingDashUnlessAllowed) {
  const auto t = spec_template();
  // Every one of these matches its pattern, which allows '-'.
  EXPECT_EQ(refused_param(t, request(R"({"suite_filter": "--help"})")), "suite_filter");
  EXPECT_EQ(refused_param(t, request(R"({"suite_filter": "c", "target": "-x"})")), "target");
  EXPECT_EQ(refused_param(t, request(R"({"suite_filter": "c", "test_ids": ["a", "--all"]})")),
            "test_ids");
  // A dash inside the value is fine.
  EXPECT_EQ(refused_param(t, request(R"({"suite_filter": "c", "target": "gpt-4o"})")),
            "<accepted>");

  auto child = spec_child();
  child["params"]["target"]["allow_dash"] = true;
  child["params"]["test_ids"]["items"]["allow_dash"] = true;
  const auto allowing = ChildTemplate::parse(child);
  EXPECT_EQ(refused_param(allowing, request(R"({"suite_filter": "c", "target": "-x"})")),
            "<accepted>");
  EXPECT_EQ(
      refused_param(allowing, request(R"({"suite_filter": "c", "test_ids": ["a", "--all"]})")),
      "<accepted>");
  // allow_dash is per param: suite_filter still refuses it.
  EXPECT_EQ(refused_param(allowing, request(R"({"suite_filter": "--help"})")), "suite_filter");
}

// A template whose `note` param has no pattern, so only the built-in rules apply.
ChildTemplate free_text_template() {
  return ChildTemplate::parse(request(R"({
    "argv": ["prog", "{note}", "--note={note}"],
    "optional": {"tags": ["--tag", "{tags}"]},
    "params": {
      "note": {"type": "string", "required": true},
      "tags": {"type": "array", "items": {"type": "string"}}
    }
  })"));
}

TEST(ChildTemplateValidate, RefusesANulCharacter) {
  const auto t = free_text_template();
  OrderedJson body;
  body["note"] = std::string("a\0b", 3);
  EXPECT_EQ(refused_param(t, body), "note");
  body["note"] = "ab";
  body["tags"] = {std::string("x\0", 2)};
  EXPECT_EQ(refused_param(t, body), "tags");
}

TEST(ChildTemplateValidate, RefusesAnOverLongString) {
  const auto t = free_text_template();
  OrderedJson body;
  body["note"] = std::string(200, 'a');
  EXPECT_EQ(refused_param(t, body), "<accepted>");
  body["note"] = std::string(1 << 20, 'a');
  EXPECT_EQ(refused_param(t, body), "note");
  body["note"] = "short";
  body["tags"] = {"ok", std::string(1 << 20, 'b')};
  EXPECT_EQ(refused_param(t, body), "tags");
}

// The length limit comes before the pattern, so a huge value never reaches
// std::regex (whose matcher recurses once per character).
TEST(ChildTemplateValidate, ChecksLengthBeforeThePattern) {
  const auto t = spec_template();
  OrderedJson body;
  body["suite_filter"] = std::string(4000, 'a');
  EXPECT_EQ(refused_param(t, body), "<accepted>");
  body["suite_filter"] = std::string(1 << 20, 'a');
  EXPECT_EQ(refused_param(t, body), "suite_filter");
  body["suite_filter"] = "core";
  body["test_ids"] = {std::string(1 << 20, 'a')};
  EXPECT_EQ(refused_param(t, body), "test_ids");
}

// ---------------------------------------------------------------- rendering

TEST(ChildTemplateRender, RendersTheMainArgv) {
  const auto t = spec_template();
  EXPECT_EQ(t.render(request(R"({"suite_filter": "core"})"), context()),
            (Argv{"agentv", "eval", "run", "core", "--output", "/runs/r-20240101-abc"}));
}

TEST(ChildTemplateRender, AppendsOptionalGroupsInDeclarationOrderOnlyWhenGiven) {
  const auto t = spec_template();
  // The request lists its params in another order than the template.
  const auto body = request(
      R"({"test_ids": ["t1", "t2"], "workers": 8, "target": "gpt", "suite_filter": "core"})");
  ASSERT_FALSE(t.validate(body).has_value());
  EXPECT_EQ(t.render(body, context()),
            (Argv{"agentv", "eval", "run", "core", "--output", "/runs/r-20240101-abc", "--target",
                  "gpt", "--workers", "8", "--test-id", "t1", "--test-id", "t2"}));
  EXPECT_EQ(t.render(request(R"({"suite_filter": "core", "workers": 3})"), context()),
            (Argv{"agentv", "eval", "run", "core", "--output", "/runs/r-20240101-abc", "--workers",
                  "3"}));
}

TEST(ChildTemplateRender, DeclarationOrderWinsOverAlphabeticalOrder) {
  const auto t = ChildTemplate::parse(request(R"({
    "argv": ["prog"],
    "optional": {"zeta": ["--zeta", "{zeta}"], "alpha": ["--alpha", "{alpha}"]},
    "params": {"alpha": {"type": "string"}, "zeta": {"type": "string"}}
  })"));
  EXPECT_EQ(t.render(request(R"({"alpha": "a", "zeta": "z"})"), context()),
            (Argv{"prog", "--zeta", "z", "--alpha", "a"}));
}

TEST(ChildTemplateRender, AnEmptyArrayAddsNoGroup) {
  const auto t = spec_template();
  EXPECT_EQ(t.render(request(R"({"suite_filter": "core", "test_ids": []})"), context()).size(), 6u);
}

TEST(ChildTemplateRender, SubstitutesEmbeddedAndBuiltinPlaceholders) {
  const auto t = ChildTemplate::parse(request(R"({
    "argv": ["prog", "--out={output_dir}", "--run={run_id}", "--try={attempt}",
             "{run_id}.{attempt}.log", "{}", "{ output_dir }", "{a-b}"]
  })"));
  EXPECT_EQ(t.render(OrderedJson::object(), context()),
            (Argv{"prog", "--out=/runs/r-20240101-abc", "--run=r-20240101-abc", "--try=2",
                  "r-20240101-abc.2.log", "{}", "{ output_dir }", "{a-b}"}));
}

TEST(ChildTemplateRender, RendersIntegersAsDecimal) {
  const auto t = ChildTemplate::parse(request(R"({
    "argv": ["prog", "--n={n}"],
    "optional": {"shards": ["--shard", "{shards}"]},
    "params": {
      "n": {"type": "integer", "required": true},
      "shards": {"type": "array", "items": {"type": "integer", "min": 0}}
    }
  })"));
  const auto body = request(R"({"n": -1234567890123, "shards": [0, 7]})");
  ASSERT_FALSE(t.validate(body).has_value());
  EXPECT_EQ(t.render(body, context()),
            (Argv{"prog", "--n=-1234567890123", "--shard", "0", "--shard", "7"}));
  EXPECT_EQ(refused_param(t, request(R"({"n": 1, "shards": [-1]})")), "shards");
}

TEST(ChildTemplateRender, AppliesDefaults) {
  const auto t = ChildTemplate::parse(request(R"({
    "argv": ["prog", "--tests", "{tests}"],
    "optional": {"mode": ["--mode", "{mode}"]},
    "params": {
      "tests": {"type": "integer", "min": 0, "default": 20},
      "mode":  {"type": "string", "default": "fast"}
    }
  })"));
  EXPECT_FALSE(t.validate(OrderedJson::object()).has_value());
  EXPECT_EQ(t.render(OrderedJson::object(), context()),
            (Argv{"prog", "--tests", "20", "--mode", "fast"}));
  EXPECT_EQ(t.render(request(R"({"tests": 5, "mode": "slow"})"), context()),
            (Argv{"prog", "--tests", "5", "--mode", "slow"}));
}

TEST(ChildTemplateRender, AppendsResumeArgvOnlyOnResume) {
  auto child = spec_child();
  child["resume_argv"] = {"--resume", "--from={output_dir}"};
  const auto t = ChildTemplate::parse(child);
  const auto body = request(R"({"suite_filter": "core", "workers": 2})");
  const Argv fresh{"agentv",    "eval", "run", "core", "--output", "/runs/r-20240101-abc",
                   "--workers", "2"};
  EXPECT_EQ(t.render(body, context(false)), fresh);
  auto resumed = fresh;
  resumed.push_back("--resume");
  resumed.push_back("--from=/runs/r-20240101-abc");
  EXPECT_EQ(t.render(body, context(true)), resumed);
}

TEST(ChildTemplateRender, ResumeArgvReplacesTheWholeArgvWhenGivenAsResumeArgv) {
  auto child = spec_child();
  child.erase("resume_argv");
  child["resume"] = {{"argv", {"inspect", "eval-retry", "{output_dir}/log.eval"}}};
  const auto t = ChildTemplate::parse(child);
  const auto body = request(R"({"suite_filter": "core", "workers": 2})");
  EXPECT_EQ(t.render(body, context(false)).front(), "agentv");
  EXPECT_EQ(t.render(body, context(true)),
            (Argv{"inspect", "eval-retry", "/runs/r-20240101-abc/log.eval"}));
  EXPECT_EQ(t.programs(), (Argv{"agentv", "inspect"}));
}

TEST(ChildTemplateRender, EnvValuesTakeBuiltinPlaceholdersAndKeepReferences) {
  auto child = spec_child();
  child["env"] = {{"OUT", "{output_dir}/db"},
                  {"TAG", "run={run_id};try={attempt}"},
                  {"KEY", "${OPENAI_API_KEY}"},
                  {"JSON", R"({"a": 1})"}};
  const auto env = ChildTemplate::parse(child).render_env(context());
  using Env = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(env, (Env{{"OUT", "/runs/r-20240101-abc/db"},
                      {"TAG", "run=r-20240101-abc;try=2"},
                      {"KEY", "${OPENAI_API_KEY}"},
                      {"JSON", R"({"a": 1})"}}));
}

TEST(ChildTemplateRender, RetryDelayDoublesPerDeferralUpToTheCap) {
  auto child = spec_child();
  child["retry_exit_codes"] = {75};
  child["retry_backoff"] = "2s";
  const auto t = ChildTemplate::parse(child);
  EXPECT_EQ(t.retry_exit_codes(), (std::vector<int>{75}));
  EXPECT_EQ(t.retry_delay(1), Duration(2000));
  EXPECT_EQ(t.retry_delay(3), Duration(8000));
  EXPECT_EQ(t.retry_delay(40), kMaxRetryBackoff);
  EXPECT_EQ(spec_template().retry_delay(1), kDefaultRetryBackoff);
}

TEST(ChildTemplateRender, AHostileValueStaysOneArgvElementUnchanged) {
  const auto t = free_text_template();
  for (const std::string hostile :
       {"; rm -rf /", "$(id)", "`id`", "a b\tc\nd", "'\"\\", "{output_dir}", "${HOME}", "x && y"}) {
    OrderedJson body;
    body["note"] = hostile;
    body["tags"] = {hostile};
    ASSERT_FALSE(t.validate(body).has_value()) << hostile;
    EXPECT_EQ(t.render(body, context()),
              (Argv{"prog", hostile, "--note=" + hostile, "--tag", hostile}))
        << hostile;
  }
}

TEST(ChildTemplate, ExposesCwdEnvAndProgressFile) {
  const auto t = spec_template();
  EXPECT_EQ(t.cwd(), ".");
  ASSERT_EQ(t.env().size(), 1u);
  EXPECT_EQ(t.env()[0].first, "AGENTV_NO_UPDATE_CHECK");
  EXPECT_EQ(t.env()[0].second, "1");
  EXPECT_EQ(t.progress_file(), "index.jsonl");
  EXPECT_EQ(t.source(), spec_child());
}

// ---------------------------------------------------------------- config errors

// The dotted key named by the ConfigError that parsing `child` throws.
std::string config_error_key(const OrderedJson& child) {
  try {
    ChildTemplate::parse(child);
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(e.key()), std::string::npos) << e.what();
    return e.key();
  }
  return "<accepted>";
}

TEST(ChildTemplateParse, AcceptsTheSpecExample) {
  EXPECT_EQ(config_error_key(spec_child()), "<accepted>");
}

TEST(ChildTemplateParse, StopSignalDefaultsToSigtermAndTakesTheListedNames) {
  EXPECT_EQ(ChildTemplate::parse(spec_child()).stop_signal(), SIGTERM);
  const std::pair<const char*, int> listed[] = {{"SIGTERM", SIGTERM}, {"SIGINT", SIGINT},
                                                {"SIGHUP", SIGHUP},   {"SIGQUIT", SIGQUIT},
                                                {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}};
  for (const auto& [name, signal] : listed) {
    auto child = spec_child();
    child["stop_signal"] = name;
    EXPECT_EQ(ChildTemplate::parse(child).stop_signal(), signal) << name;
  }
}

TEST(ChildTemplateParse, RefusesAnUnlistedStopSignalNamingTheKeyAndValue) {
  for (const auto& value : {OrderedJson("SIGKILL"), OrderedJson("sigint"), OrderedJson("INT"),
                            OrderedJson(2), OrderedJson("")}) {
    auto child = spec_child();
    child["stop_signal"] = value;
    EXPECT_EQ(config_error_key(child), "child.stop_signal") << value;
  }
  auto child = spec_child();
  child["stop_signal"] = "SIGKILL";
  try {
    ChildTemplate::parse(child);
    FAIL() << "SIGKILL accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'SIGKILL'"), std::string::npos) << e.what();
  }
}

TEST(ChildTemplateParse, RefusesBadResumeEnvAndRetrySettingsNamingTheKey) {
  auto both = spec_child();
  both["resume"] = {{"argv", {"x"}}};
  EXPECT_EQ(config_error_key(both), "child.resume");
  auto resume = spec_child();
  resume.erase("resume_argv");
  resume["resume"] = {{"argv", OrderedJson::array()}};
  EXPECT_EQ(config_error_key(resume), "child.resume.argv");
  resume["resume"] = {{"argv", {"x", "{nope}"}}};
  EXPECT_EQ(config_error_key(resume), "child.resume.argv");
  resume["resume"] = {{"args", {"x"}}};
  EXPECT_EQ(config_error_key(resume), "child.resume.args");
  auto env = spec_child();
  env["env"] = {{"OUT", "{suite_filter}"}};  // a param never reaches the environment
  EXPECT_EQ(config_error_key(env), "child.env.OUT");
  for (const auto& codes : {OrderedJson{0}, OrderedJson{256}, OrderedJson{"75"}, OrderedJson(75)}) {
    auto retry = spec_child();
    retry["retry_exit_codes"] = codes;
    EXPECT_EQ(config_error_key(retry), "child.retry_exit_codes") << codes;
  }
  auto backoff = spec_child();
  backoff["retry_backoff"] = "soon";
  EXPECT_EQ(config_error_key(backoff), "child.retry_backoff");
}

TEST(ChildTemplateParse, RefusesAnUnknownKeyInChild) {
  auto child = spec_child();
  child["shell"] = true;
  EXPECT_EQ(config_error_key(child), "child.shell");
  EXPECT_EQ(config_error_key(request("[]")), "child");
}

TEST(ChildTemplateParse, RefusesAnUnknownKeyInAParamSpec) {
  auto child = spec_child();
  child["params"]["target"]["patern"] = "^x$";
  EXPECT_EQ(config_error_key(child), "child.params.target.patern");

  child = spec_child();
  child["params"]["test_ids"]["items"]["required"] = true;
  EXPECT_EQ(config_error_key(child), "child.params.test_ids.items.required");
}

TEST(ChildTemplateParse, RefusesABadTypeName) {
  auto child = spec_child();
  child["params"]["workers"]["type"] = "float";
  EXPECT_EQ(config_error_key(child), "child.params.workers.type");

  child = spec_child();
  child["params"]["workers"]["type"] = 1;
  EXPECT_EQ(config_error_key(child), "child.params.workers.type");

  child = spec_child();
  child["params"]["workers"].erase("type");
  EXPECT_EQ(config_error_key(child), "child.params.workers.type");

  child = spec_child();
  child["params"]["test_ids"]["items"]["type"] = "array";
  EXPECT_EQ(config_error_key(child), "child.params.test_ids.items.type");
}

TEST(ChildTemplateParse, RefusesAnInvalidRegex) {
  auto child = spec_child();
  child["params"]["target"]["pattern"] = "^([a-z$";
  EXPECT_EQ(config_error_key(child), "child.params.target.pattern");

  child = spec_child();
  child["params"]["test_ids"]["items"]["pattern"] = "[z-a]";
  EXPECT_EQ(config_error_key(child), "child.params.test_ids.items.pattern");
}

TEST(ChildTemplateParse, RefusesAMissingOrEmptyArgv) {
  auto child = spec_child();
  child.erase("argv");
  child.erase("optional");
  EXPECT_EQ(config_error_key(child), "child.argv");
  EXPECT_EQ(config_error_key(request(R"({"argv": []})")), "child.argv");
  EXPECT_EQ(config_error_key(request(R"({"argv": [""]})")), "child.argv");
  EXPECT_EQ(config_error_key(request(R"({"argv": "prog --flag"})")), "child.argv");
  EXPECT_EQ(config_error_key(request(R"({"argv": ["prog", 1]})")), "child.argv");
}

TEST(ChildTemplateParse, RefusesAPlaceholderNamingAnUndeclaredParam) {
  auto child = spec_child();
  child["argv"].push_back("--suite={suite}");
  EXPECT_EQ(config_error_key(child), "child.argv");

  child = spec_child();
  child["resume_argv"] = {"--resume={checkpoint}"};
  EXPECT_EQ(config_error_key(child), "child.resume_argv");

  child = spec_child();
  child["optional"]["target"] = {"--target", "{target}", "{model}"};
  EXPECT_EQ(config_error_key(child), "child.optional.target");
}

TEST(ChildTemplateParse, RefusesAnOptionalParamInTheMainArgv) {
  auto child = spec_child();
  child["argv"].push_back("--target={target}");
  EXPECT_EQ(config_error_key(child), "child.argv");

  // An array param, even a required one, has no single value for the main argv.
  child = spec_child();
  child["params"]["test_ids"]["required"] = true;
  child["argv"].push_back("{test_ids}");
  EXPECT_EQ(config_error_key(child), "child.argv");

  // Another group's optional param may be absent too.
  child = spec_child();
  child["optional"]["workers"] = {"--workers", "{workers}", "--target", "{target}"};
  EXPECT_EQ(config_error_key(child), "child.optional.workers");

  // A param with a default is always present, so the main argv may use it.
  child = spec_child();
  child["params"]["target"]["default"] = "gpt";
  child["argv"].push_back("--target={target}");
  EXPECT_EQ(config_error_key(child), "<accepted>");
}

TEST(ChildTemplateParse, RefusesAnOptionalGroupForAnUndeclaredParam) {
  auto child = spec_child();
  child["optional"]["model"] = {"--model", "{model}"};
  EXPECT_EQ(config_error_key(child), "child.optional.model");
}

TEST(ChildTemplateParse, RefusesADefaultThatFailsItsOwnRule) {
  auto child = spec_child();
  child["params"]["workers"]["default"] = 0;
  EXPECT_EQ(config_error_key(child), "child.params.workers.default");

  child = spec_child();
  child["params"]["workers"]["default"] = "8";
  EXPECT_EQ(config_error_key(child), "child.params.workers.default");

  child = spec_child();
  child["params"]["target"]["default"] = "--evil";
  EXPECT_EQ(config_error_key(child), "child.params.target.default");

  child = spec_child();
  child["params"]["test_ids"]["default"] = {"ok", "not ok"};
  EXPECT_EQ(config_error_key(child), "child.params.test_ids.default");
}

TEST(ChildTemplateParse, RefusesAParamNamedLikeABuiltinPlaceholder) {
  auto child = spec_child();
  child["params"]["run_id"] = {{"type", "string"}};
  EXPECT_EQ(config_error_key(child), "child.params.run_id");
}

// ---------------------------------------------------------------- demo

TEST(ChildTemplateDemo, RendersTheDemoChildWithDefaults) {
  const auto t = ChildTemplate::demo("/x/inflight-demo-eval");
  const auto empty = OrderedJson::object();
  EXPECT_FALSE(t.validate(empty).has_value());
  EXPECT_EQ(t.render(empty, context()),
            (Argv{"/x/inflight-demo-eval", "--output", "/runs/r-20240101-abc", "--tests", "20",
                  "--test-ms", "500"}));
  EXPECT_EQ(t.render(request(R"({"tests": 3, "test_ms": 10})"), context(true)),
            (Argv{"/x/inflight-demo-eval", "--output", "/runs/r-20240101-abc", "--tests", "3",
                  "--test-ms", "10", "--resume"}));
  EXPECT_EQ(refused_param(t, request(R"({"tests": -1})")), "tests");
  EXPECT_EQ(refused_param(t, request(R"({"suite": "x"})")), "suite");
  EXPECT_EQ(t.progress_file(), "index.jsonl");
}

}  // namespace
}  // namespace inflight
