// What a child's environment holds: the base, its template's inherit_env and
// env, never inflight's own variables nor another template's secrets; and
// the template field inherit_env, refused when it names what cannot be given.
#include "inflight/core/child_environment.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "inflight/core/child_templates.hpp"

namespace inflight {
namespace {

// A null-terminated block like environ, over strings the test keeps alive.
class EnvBlock {
 public:
  EnvBlock(std::initializer_list<std::string> entries) : entries_(entries) {
    for (auto& entry : entries_) pointers_.push_back(entry.c_str());
    pointers_.push_back(nullptr);
  }
  const char* const* get() const { return pointers_.data(); }

 private:
  std::vector<std::string> entries_;
  std::vector<const char*> pointers_;
};

const EnvBlock& serve_env() {
  static const EnvBlock env{"PATH=/usr/bin:/bin",
                            "HOME=/home/inflight",
                            "USER=inflight",
                            "LANG=C.UTF-8",
                            "LC_ALL=C.UTF-8",
                            "TZ=UTC",
                            "TMPDIR=/tmp",
                            "HTTPS_PROXY=http://proxy:3128",
                            "SHARED_CACHE=/cache",
                            "OPENAI_API_KEY=sk-openai",
                            "ANTHROPIC_API_KEY=sk-anthropic",
                            "INFLIGHT_API_TOKEN=api-secret",
                            "INFLIGHT_GIT_TOKEN=git-secret"};
  return env;
}

// {NAME: value} of `entries`; each name at most once.
std::map<std::string, std::string> as_map(const std::vector<std::string>& entries) {
  std::map<std::string, std::string> out;
  for (const auto& entry : entries) {
    const auto equals = entry.find('=');
    EXPECT_NE(equals, std::string::npos) << entry;
    EXPECT_TRUE(out.emplace(entry.substr(0, equals), entry.substr(equals + 1)).second) << entry;
  }
  return out;
}

ChildTemplate child(OrderedJson extra = OrderedJson::object(),
                    const std::string& name = "default") {
  OrderedJson source{{"argv", {"eval-tool", "{output_dir}"}}};
  source.update(extra);
  return ChildTemplate::parse(source, name, name == "default" ? "child" : "children." + name);
}

RenderContext attempt_context() {
  return {.run_id = "r1", .output_dir = "/runs/r1", .attempt = 3, .resume = false};
}

const std::map<std::string, std::string> kBase{
    {"PATH", "/usr/bin:/bin"}, {"HOME", "/home/inflight"}, {"USER", "inflight"},
    {"LANG", "C.UTF-8"},       {"LC_ALL", "C.UTF-8"},      {"TZ", "UTC"},
    {"TMPDIR", "/tmp"}};

TEST(ChildEnvironment, ATemplateWithoutEnvGetsTheBaseOnly) {
  EXPECT_EQ(as_map(child_environment(serve_env().get(), child(), attempt_context())), kBase);
}

TEST(ChildEnvironment, TheBaseHoldsOnlyWhatServeHas) {
  const EnvBlock sparse{"PATH=/bin", "SECRET=x"};
  EXPECT_EQ(as_map(child_environment(sparse.get(), child(), attempt_context())),
            (std::map<std::string, std::string>{{"PATH", "/bin"}}));
}

TEST(ChildEnvironment, InheritEnvAddsTheNamedVariablesThatServeHas) {
  const auto t = child({{"inherit_env", {"HTTPS_PROXY", "SHARED_CACHE", "NOT_SET_ANYWHERE"}}});
  auto expected = kBase;
  expected["HTTPS_PROXY"] = "http://proxy:3128";
  expected["SHARED_CACHE"] = "/cache";
  EXPECT_EQ(as_map(child_environment(serve_env().get(), t, attempt_context())), expected);
}

TEST(ChildEnvironment, EnvResolvesReferencesAndPlaceholdersAndWinsOverTheBase) {
  const auto t = child({{"env",
                         {{"OPENAI_API_KEY", "${OPENAI_API_KEY}"},
                          {"STATE", "{output_dir}/state-{attempt}"},
                          {"HOME", "{output_dir}"},
                          {"UNSET", "${NOT_SET_ANYWHERE}"}}}});
  auto expected = kBase;
  expected["OPENAI_API_KEY"] = "sk-openai";
  expected["STATE"] = "/runs/r1/state-3";
  expected["HOME"] = "/runs/r1";
  expected["UNSET"] = "";
  EXPECT_EQ(as_map(child_environment(serve_env().get(), t, attempt_context())), expected);
}

TEST(ChildEnvironment, OneTemplatesSecretNeverReachesAnotherTemplatesChildren) {
  const auto templates = ChildTemplates::from_config(
      {{"children",
        {{"openai", {{"argv", {"tool"}}, {"env", {{"KEY", "${OPENAI_API_KEY}"}}}}},
         {"anthropic", {{"argv", {"tool"}}, {"env", {{"KEY", "${ANTHROPIC_API_KEY}"}}}}}}}},
      "demo");
  const auto openai =
      as_map(child_environment(serve_env().get(), *templates.find("openai"), attempt_context()));
  const auto anthropic =
      as_map(child_environment(serve_env().get(), *templates.find("anthropic"), attempt_context()));
  EXPECT_EQ(openai.at("KEY"), "sk-openai");
  EXPECT_EQ(anthropic.at("KEY"), "sk-anthropic");
  for (const auto& [name, value] : openai) EXPECT_NE(value, "sk-anthropic") << name;
  for (const auto& [name, value] : anthropic) EXPECT_NE(value, "sk-openai") << name;
  EXPECT_EQ(templates.referenced_variables(),
            (std::set<std::string>{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}));
}

TEST(ChildEnvironment, InflightVariablesNeverReachAChild) {
  // A block that smuggles an INFLIGHT_* reference past the parser's check.
  const EnvBlock env{"PATH=/bin", "INFLIGHT_API_TOKEN=api-secret", "LC_INFLIGHT=x"};
  for (const auto& entry : child_environment(env.get(), child(), attempt_context()))
    EXPECT_FALSE(entry.starts_with("INFLIGHT_")) << entry;
  for (const auto& entry :
       child_environment(serve_env().get(), child({{"inherit_env", {"HOME"}}}), attempt_context()))
    EXPECT_EQ(entry.find("secret"), std::string::npos) << entry;
}

TEST(AgentEnvironment, IsTheBaseAndWhatGitAndTlsRead) {
  const auto env = as_map(agent_environment(serve_env().get()));
  EXPECT_EQ(env.at("HTTPS_PROXY"), "http://proxy:3128");
  EXPECT_EQ(env.at("HOME"), "/home/inflight");
  EXPECT_FALSE(env.count("SHARED_CACHE"));
  EXPECT_FALSE(env.count("OPENAI_API_KEY"));
  EXPECT_FALSE(env.count("ANTHROPIC_API_KEY"));
  EXPECT_FALSE(env.count("INFLIGHT_API_TOKEN"));
  EXPECT_FALSE(env.count("INFLIGHT_GIT_TOKEN"));
  EXPECT_EQ(env.size(), 8u);
}

// ---------------------------------------------------------------- inherit_env

// The message of the ConfigError that parsing `inherit_env` throws.
std::string inherit_env_error(const OrderedJson& inherit_env) {
  try {
    child({{"inherit_env", inherit_env}});
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "child.inherit_env");
    return e.what();
  }
  return "<accepted>";
}

TEST(InheritEnv, RefusesInflightVariablesNamingThem) {
  const auto message = inherit_env_error({"HOME", "INFLIGHT_GIT_TOKEN"});
  EXPECT_NE(message.find("INFLIGHT_GIT_TOKEN"), std::string::npos) << message;
}

TEST(InheritEnv, RefusesWhatIsNotAVariableName) {
  for (const auto* bad : {"1ABC", "A-B", "A=B", "", "A B"}) {
    const auto message = inherit_env_error({bad});
    EXPECT_NE(message.find("'" + std::string(bad) + "'"), std::string::npos) << message;
  }
  EXPECT_NE(inherit_env_error("HOME"), "<accepted>");
  EXPECT_NE(inherit_env_error({{"HOME", 1}}), "<accepted>");
  EXPECT_NE(inherit_env_error({1}), "<accepted>");
}

TEST(InheritEnv, AcceptsNamesAndCountsInTheDigest) {
  EXPECT_EQ(inherit_env_error({"_A", "Z9", "http_proxy"}), "<accepted>");
  const auto t = child({{"inherit_env", {"HTTPS_PROXY"}}});
  EXPECT_EQ(t.inherit_env(), (std::vector<std::string>{"HTTPS_PROXY"}));
  EXPECT_NE(t.digest(), child().digest());
  EXPECT_NE(t.digest(), child({{"inherit_env", {"HTTP_PROXY"}}}).digest());
}

}  // namespace
}  // namespace inflight
