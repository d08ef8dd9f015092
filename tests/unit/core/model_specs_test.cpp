// The config's `models` and the model placeholders of the child templates
// (docs/models.md "Wiring a model"): what a start refuses, naming the key,
// and what an attempt's argv and environment get.
#include "inflight/core/model_specs.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "inflight/core/child_templates.hpp"

namespace inflight {
namespace {

OrderedJson config_with_models(const OrderedJson& models) {
  return {{"models", models}};
}

std::string refusal_of(const OrderedJson& file) {
  try {
    parse_model_specs(file);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ModelSpecs, ReadsEachKeyWithItsDefault) {
  const auto specs = parse_model_specs(config_with_models(
      {{"openai", {{"upstream", "https://api.openai.com/"}, {"api_key_env", "OPENAI_API_KEY"}}},
       {"claude",
        {{"upstream", "http://127.0.0.1:8080/base"},
         {"api_key_file", "/run/key"},
         {"auth", "x-api-key"},
         {"timeout", "90s"},
         {"replay", false},
         {"ignore_fields", {"/metadata/user_id"}}}}}));
  const auto& openai = specs.at("openai");
  EXPECT_TRUE(openai.upstream.tls);
  EXPECT_EQ(openai.upstream.host, "api.openai.com");
  EXPECT_EQ(openai.upstream.port, "443");
  EXPECT_EQ(openai.upstream.base_path, "");
  EXPECT_EQ(openai.auth, ModelAuth::bearer);
  EXPECT_EQ(openai.timeout, kDefaultModelTimeout);
  EXPECT_TRUE(openai.replay);
  const auto& claude = specs.at("claude");
  EXPECT_FALSE(claude.upstream.tls);
  EXPECT_EQ(claude.upstream.origin(), "http://127.0.0.1:8080");
  EXPECT_EQ(claude.upstream.base_path, "/base");
  EXPECT_EQ(claude.auth, ModelAuth::x_api_key);
  EXPECT_EQ(claude.timeout, Duration(90'000));
  EXPECT_FALSE(claude.replay);
  EXPECT_EQ(claude.ignore_fields, std::vector<std::string>{"/metadata/user_id"});
}

// A model's name is [A-Za-z0-9_][A-Za-z0-9_.-]{0,63}: what the listener's paths may carry.
TEST(ModelSpecs, AModelNameIsAWordOfAtMost64Bytes) {
  for (const std::string& good :
       std::vector<std::string>{"openai", "a", "_x", "gpt-4.1_mini", "9", std::string(64, 'm')})
    EXPECT_TRUE(is_model_name(good)) << good;
  for (const std::string& bad : std::vector<std::string>{
           "", ".x", "-x", "a/b", "a b", "caf\xc3\xa9", "a\n", "a:b", std::string(65, 'm')})
    EXPECT_FALSE(is_model_name(bad)) << bad;
}

TEST(ModelSpecs, RefusesWhatCannotWorkNamingTheKey) {
  const auto model = [](OrderedJson extra) {
    OrderedJson m{{"upstream", "https://api.example.com"}, {"api_key_env", "KEY"}};
    m.update(extra);
    return config_with_models({{"m", m}});
  };
  EXPECT_NE(refusal_of(model({{"upstream", "ftp://x"}})).find("models.m.upstream"),
            std::string::npos);
  EXPECT_NE(refusal_of(model({{"upstream", "https://user:pw@x"}})).find("models.m.upstream"),
            std::string::npos);
  EXPECT_NE(refusal_of(model({{"upstream", "https://x/?q=1"}})).find("models.m.upstream"),
            std::string::npos);
  EXPECT_NE(refusal_of(model({{"api_key_env", "INFLIGHT_API_TOKEN"}})).find("INFLIGHT_"),
            std::string::npos);
  EXPECT_NE(refusal_of(model({{"api_key_file", "/k"}})).find("not both"), std::string::npos);
  EXPECT_NE(refusal_of(model({{"auth", "basic"}})).find("models.m.auth"), std::string::npos);
  EXPECT_NE(refusal_of(model({{"timeout", "soon"}})).find("models.m.timeout"), std::string::npos);
  EXPECT_NE(refusal_of(model({{"ignore_fields", {"no-slash"}}})).find("ignore_fields"),
            std::string::npos);
  EXPECT_NE(refusal_of(model({{"proxy", "x"}})).find("models.m.proxy"), std::string::npos);
  EXPECT_NE(refusal_of(config_with_models({{"m", {{"upstream", "https://x"}}}})).find("api_key"),
            std::string::npos);
  EXPECT_NE(refusal_of(config_with_models({{"bad name", {{"upstream", "https://x"}}}}))
                .find("models.bad name"),
            std::string::npos);
}

ChildTemplate caller(OrderedJson env, OrderedJson argv = {"tool", "{model_url:openai}/v1"}) {
  return ChildTemplate::parse({{"argv", argv}, {"env", env}});
}

TEST(ModelPlaceholders, FillArgvAndEnvFromTheAttempt) {
  const auto child =
      caller({{"OPENAI_BASE_URL", "{model_url:openai}/v1"}, {"OPENAI_API_KEY", "{model_key}"}});
  EXPECT_EQ(child.models(), std::set<std::string>{"openai"});
  RenderContext context{.run_id = "r",
                        .output_dir = "/runs/r",
                        .attempt = 2,
                        .resume = true,
                        .model_urls = {{"openai", "http://127.0.0.1:9/models/openai"}},
                        .model_key = "inflight-token"};
  EXPECT_EQ(child.render(OrderedJson::object(), context),
            (std::vector<std::string>{"tool", "http://127.0.0.1:9/models/openai/v1"}));
  const auto env = child.render_env(context);
  EXPECT_EQ(env[0].second, "http://127.0.0.1:9/models/openai/v1");
  EXPECT_EQ(env[1].second, "inflight-token");
}

TEST(ModelPlaceholders, TheTokenIsRefusedInArgv) {
  try {
    caller(OrderedJson::object(), {"tool", "--key", "{model_key}"});
    FAIL() << "{model_key} in argv was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("env only"), std::string::npos) << e.what();
  }
}

TEST(ModelPlaceholders, AModelTheConfigLacksOrAKeyHandedToAChildIsRefused) {
  const auto templates = [](OrderedJson child) {
    return ChildTemplates::from_config({{"children", {{"eval", child}}}}, "demo");
  };
  const ModelSpecs models = parse_model_specs(config_with_models(
      {{"openai", {{"upstream", "https://api.openai.com"}, {"api_key_env", "OPENAI_KEY"}}}}));
  const auto refusal = [&](OrderedJson child) -> std::string {
    try {
      templates(child).check_models(models);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(refusal({{"argv", {"tool", "{model_url:openai}"}}}), "");
  EXPECT_NE(refusal({{"argv", {"tool", "{model_url:anthropic}"}}}).find("anthropic"),
            std::string::npos);
  EXPECT_NE(refusal({{"argv", {"tool"}}, {"inherit_env", {"OPENAI_KEY"}}}).find("model's key"),
            std::string::npos);
  EXPECT_NE(refusal({{"argv", {"tool"}}, {"env", {{"K", "${OPENAI_KEY}"}}}}).find("model's key"),
            std::string::npos);
}

}  // namespace
}  // namespace inflight
