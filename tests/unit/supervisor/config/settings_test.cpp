// The options table and the settings read from it: precedence, defaults
// written once, messages that name the source, refused combinations.
#include "inflight/supervisor/config/settings.hpp"

#include <gtest/gtest.h>

#include <charconv>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "option_sources_testing.hpp"
#include "temp_dir.hpp"

namespace inflight {
namespace {

using namespace settings_testing;

// ---------------------------------------------------------------- precedence

TEST(OptionSources, FlagWinsOverEnvOverFileOverDefault) {
  const Flags flag{{"results-repo", "from-flag"}};
  const Env env{{"INFLIGHT_RESULTS_REPO", "from-env"}};
  const OrderedJson file{{"results_repo", "from-file"}};
  EXPECT_EQ(sources(flag, env, file).text("results-repo"), "from-flag");
  EXPECT_EQ(sources({}, env, file).text("results-repo"), "from-env");
  EXPECT_EQ(sources({}, {}, file).text("results-repo"), "from-file");
  EXPECT_EQ(sources({}, {}).text("results-repo"), "./.inflight/results.git");
}

TEST(OptionSources, AppliesPrecedenceToEveryKindOfOption) {
  const OrderedJson file{{"grace_period", "40s"}, {"max_concurrent", 7}, {"runs_dir", "/f/runs"}};
  const Env env{{"INFLIGHT_GRACE_PERIOD", "50s"},
                {"INFLIGHT_MAX_CONCURRENT", "8"},
                {"INFLIGHT_RUNS_DIR", "/e/runs"}};
  const Flags flags{{"grace-period", "60s"}, {"max-concurrent", "9"}, {"runs-dir", "/g/runs"}};

  auto s = read_serve_settings(sources(flags, env, file));
  EXPECT_EQ(s.grace_period, Duration(60'000));
  EXPECT_EQ(s.max_concurrent, 9);
  EXPECT_EQ(s.store.runs_dir, "/g/runs");

  s = read_serve_settings(sources({}, env, file));
  EXPECT_EQ(s.grace_period, Duration(50'000));
  EXPECT_EQ(s.max_concurrent, 8);
  EXPECT_EQ(s.store.runs_dir, "/e/runs");

  s = read_serve_settings(sources({}, {}, file));
  EXPECT_EQ(s.grace_period, Duration(40'000));
  EXPECT_EQ(s.max_concurrent, 7);
  EXPECT_EQ(s.store.runs_dir, "/f/runs");

  s = read_serve_settings(sources({}, {}));
  EXPECT_EQ(s.grace_period, Duration(30'000));
  EXPECT_EQ(s.max_concurrent, 4);
  EXPECT_EQ(s.store.runs_dir, "./.inflight/runs");
  EXPECT_EQ(s.store.results_repo, "./.inflight/results.git");
  EXPECT_EQ(s.store.git_timeout, Duration(60'000));
  EXPECT_EQ(s.flush_window, Duration(2'000));
  EXPECT_EQ(s.checkpoint_interval, Duration(30'000));
}

TEST(OptionSources, AskTheEnvironmentForInflightUpperSnakeNames) {
  std::vector<std::string> asked;
  OptionSources s({}, OrderedJson::object(), [&](const std::string& name) {
    asked.push_back(name);
    return std::optional<std::string>();
  });
  EXPECT_EQ(s.text("git-ssh-known-hosts"), "");
  EXPECT_EQ(asked, std::vector<std::string>{"INFLIGHT_GIT_SSH_KNOWN_HOSTS"});
}

TEST(OptionSources, ALowerSourceIsNotCheckedWhenAHigherOneWins) {
  // A bad value that is overridden does no harm.
  EXPECT_EQ(usage_error(sources({{"grace-period", "10s"}}, {{"INFLIGHT_GRACE_PERIOD", "soon"}},
                                {{"grace_period", "later"}})),
            "<accepted>");
}

// ---------------------------------------------------------------- bad values

TEST(OptionSources, ABadDurationNamesItsSource) {
  auto message = usage_error(sources({{"grace-period", "30 seconds"}}));
  EXPECT_TRUE(contains(message, "--grace-period")) << message;
  EXPECT_TRUE(contains(message, "30 seconds")) << message;

  message = usage_error(sources({}, {{"INFLIGHT_GRACE_PERIOD", "30x"}}));
  EXPECT_TRUE(contains(message, "INFLIGHT_GRACE_PERIOD")) << message;
  EXPECT_FALSE(contains(message, "--grace-period")) << message;

  message = usage_error(sources({}, {}, {{"grace_period", "forever"}}));
  EXPECT_TRUE(contains(message, "config key grace_period")) << message;

  // A bare number in the file is not a duration either.
  message = usage_error(sources({}, {}, {{"grace_period", 30}}));
  EXPECT_TRUE(contains(message, "config key grace_period")) << message;
}

TEST(OptionSources, ABadIntegerNamesItsSource) {
  auto message = usage_error(sources({{"max-concurrent", "0"}}));
  EXPECT_TRUE(contains(message, "--max-concurrent")) << message;
  message = usage_error(sources({}, {{"INFLIGHT_MAX_ATTEMPTS", "3x"}}));
  EXPECT_TRUE(contains(message, "INFLIGHT_MAX_ATTEMPTS")) << message;
}

TEST(OptionSources, ABadLogFormatIsRefused) {
  EXPECT_NE(usage_error(sources({{"log-format", "xml"}})), "<accepted>");
  EXPECT_EQ(read_serve_settings(sources({{"log-format", "text"}})).store.log_format,
            log::Format::text);
  EXPECT_EQ(read_serve_settings(sources({}, {{"INFLIGHT_LOG_FORMAT", "json"}})).store.log_format,
            log::Format::json);
}

TEST(OptionSources, APodNameThatCannotBeInABranchNameIsRefused) {
  for (const char* bad : {"a/b", "a b", "..x", ".hidden", "a:b"})
    EXPECT_NE(usage_error(sources({{"pod-name", bad}})), "<accepted>") << bad;
  // sources() only sets pod-name when the flag is not there already.
  EXPECT_EQ(read_serve_settings(sources({}, {})).store.pod_name, "pod-a");
}

// ---------------------------------------------------------------- config file

std::filesystem::path write_file(const TempDir& dir, const std::string& text) {
  const auto path = dir.path() / "inflight.json";
  std::ofstream(path) << text;
  return path;
}

std::string load_error(const std::filesystem::path& path) {
  try {
    OptionSources::load_config_file(path);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<accepted>";
}

TEST(LoadConfigFile, ReadsKnownKeysAndTheChild) {
  TempDir dir;
  const auto path = write_file(dir, R"({
    "results_repo": "file:///srv/results.git",
    "grace_period": "45s",
    "checkpoint_exclude": ["*.tmp", "secrets/**"],
    "child": {"argv": ["prog", "--out", "{output_dir}"]}
  })");
  const auto file = OptionSources::load_config_file(path);
  ASSERT_TRUE(file.is_object());
  EXPECT_EQ(file.begin().key(), "results_repo");  // order kept
  const auto s = read_serve_settings(sources({}, {}, file));
  EXPECT_EQ(s.store.results_repo, "file:///srv/results.git");
  EXPECT_EQ(s.grace_period, Duration(45'000));
  const auto* child = s.children.find("default");
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(child->source()["argv"][2], "{output_dir}");
}

TEST(LoadConfigFile, NamedTemplatesBesideTheDefaultOneAndDeepFilesRefused) {
  TempDir dir;
  const auto file = OptionSources::load_config_file(write_file(dir, R"({
    "child": {"argv": ["prog"]},
    "children": {"agentv": {"argv": ["agentv", "eval"]}}
  })"));
  const auto s = read_serve_settings(sources({}, {}, file));
  EXPECT_EQ(s.children.names(), "agentv, default");
  EXPECT_EQ(s.children.find("agentv")->programs().front(), "agentv");
  const auto deep = "{\"child\": " + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_TRUE(contains(load_error(write_file(dir, deep)), "nested deeper"))
      << load_error(write_file(dir, deep));
}

TEST(LoadConfigFile, RefusesAnUnknownKeyNamingIt) {
  TempDir dir;
  const auto message = load_error(write_file(dir, R"({"runs_dir": "/r", "grace_periods": "5s"})"));
  EXPECT_TRUE(contains(message, "grace_periods")) << message;
  // Flag spellings with dashes are not config keys.
  EXPECT_NE(load_error(write_file(dir, R"({"runs-dir": "/r"})")), "<accepted>");
}

TEST(LoadConfigFile, RefusesNonJson) {
  TempDir dir;
  EXPECT_NE(load_error(write_file(dir, "runs_dir = /r\n")), "<accepted>");
  EXPECT_NE(load_error(write_file(dir, R"({"runs_dir": "/r",})")), "<accepted>");
  EXPECT_NE(load_error(write_file(dir, "")), "<accepted>");
  EXPECT_NE(load_error(write_file(dir, R"(["runs_dir"])")), "<accepted>");
  EXPECT_NE(load_error(dir.path() / "missing.json"), "<accepted>");
}

// Regression: `"api_token": null` used to become the token "null".
TEST(LoadConfigFile, RefusesANullOrBooleanValueNamingTheKey) {
  TempDir dir;
  auto message = load_error(write_file(dir, R"({"listen": "0.0.0.0:1", "api_token": null})"));
  EXPECT_TRUE(contains(message, "api_token")) << message;
  message = load_error(write_file(dir, R"({"runs_dir": true})"));
  EXPECT_TRUE(contains(message, "runs_dir")) << message;
  message = load_error(write_file(dir, R"({"checkpoint_exclude": ["*.tmp", 1]})"));
  EXPECT_TRUE(contains(message, "checkpoint_exclude")) << message;
  message = load_error(write_file(dir, R"({"results_repo": {"url": "x"}})"));
  EXPECT_TRUE(contains(message, "results_repo")) << message;
  EXPECT_EQ(load_error(write_file(dir, R"({"max_concurrent": 2, "runs_dir": "/r"})")),
            "<accepted>");
}

// ---------------------------------------------------------------- listen

TEST(ServeSettings, DefaultListenIsLoopback3117) {
  const auto s = read_serve_settings(sources({}));
  EXPECT_EQ(s.listen_host, "127.0.0.1");
  EXPECT_EQ(s.listen_port, 3117);
}

TEST(ServeSettings, APublicListenNeedsAnApiToken) {
  const auto message = usage_error(sources({{"listen", "0.0.0.0:3117"}}));
  EXPECT_TRUE(contains(message, "--api-token")) << message;
  EXPECT_NE(usage_error(sources({}, {{"INFLIGHT_LISTEN", "[::]:3117"}})), "<accepted>");

  auto s = read_serve_settings(sources({{"listen", "0.0.0.0:3117"}, {"api-token", "s3cret"}}));
  EXPECT_EQ(s.listen_host, "0.0.0.0");
  EXPECT_EQ(s.listen_port, 3117);
  EXPECT_EQ(s.api_token, "s3cret");

  s = read_serve_settings(sources({{"listen", "0.0.0.0:8080"}}, {{"INFLIGHT_API_TOKEN", "t"}}));
  EXPECT_EQ(s.listen_port, 8080);
  EXPECT_EQ(s.api_token, "t");
}

TEST(ServeSettings, ListenPortZeroAndLoopbackForms) {
  auto s = read_serve_settings(sources({{"listen", "127.0.0.1:0"}}));
  EXPECT_EQ(s.listen_host, "127.0.0.1");
  EXPECT_EQ(s.listen_port, 0);
  s = read_serve_settings(sources({{"listen", "localhost:9000"}}));
  EXPECT_EQ(s.listen_host, "127.0.0.1");
  EXPECT_EQ(s.listen_port, 9000);
  s = read_serve_settings(sources({{"listen", "[::1]:9001"}}));
  EXPECT_EQ(s.listen_host, "::1");
  EXPECT_EQ(s.listen_port, 9001);
}

TEST(ServeSettings, RefusesAMalformedListen) {
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1",
                          "127.0.0.1:80x", "example.com:80", ":3117"})
    EXPECT_NE(usage_error(sources({{"listen", bad}})), "<accepted>") << bad;
}

// ---------------------------------------------------------------- lists

TEST(ServeSettings, CheckpointExcludeFromAFileArrayBecomesAList) {
  const OrderedJson file{{"checkpoint_exclude", {"*.tmp", "secrets/**", ".env"}}};
  EXPECT_EQ(read_serve_settings(sources({}, {}, file)).store.checkpoint_exclude,
            (std::vector<std::string>{"*.tmp", "secrets/**", ".env"}));
  EXPECT_EQ(read_serve_settings(sources({{"checkpoint-exclude", "a,,b"}}, {}, file))
                .store.checkpoint_exclude,
            (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(read_serve_settings(sources({})).store.checkpoint_exclude,
            (std::vector<std::string>{".env", "*.pem", "*.key", "id_rsa*"}));
}

// ---------------------------------------------------------------- the table

// No flag, no variable, no file: what the readers see.
OptionSources no_sources() {
  return OptionSources({}, OrderedJson::object(), fake_env({}));
}

std::int64_t parse_integer(const std::string& text) {
  std::int64_t value = 0;
  const auto [rest, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  EXPECT_TRUE(ec == std::errc{} && rest == text.data() + text.size()) << text;
  return value;
}

TEST(OptionTable, EveryOptionReadsItsTableDefaultWhenNoSourceHasIt) {
  for (const auto& spec : option_table()) {
    SCOPED_TRACE(spec.name);
    // The default, given as a flag, goes through the parser user input does.
    const OptionSources given({{spec.name, spec.default_text}}, OrderedJson::object(),
                              fake_env({}));
    switch (spec.kind) {
      case OptionKind::duration:
        ASSERT_TRUE(parse_duration(spec.default_text));
        EXPECT_EQ(no_sources().duration(spec.name), *parse_duration(spec.default_text));
        EXPECT_EQ(no_sources().duration(spec.name), given.duration(spec.name));
        break;
      case OptionKind::integer:
        EXPECT_EQ(no_sources().integer(spec.name), parse_integer(spec.default_text));
        EXPECT_EQ(no_sources().integer(spec.name), given.integer(spec.name));
        EXPECT_LE(spec.min, no_sources().integer(spec.name));
        EXPECT_GE(spec.max, no_sources().integer(spec.name));
        break;
      case OptionKind::list:
        EXPECT_FALSE(no_sources().list(spec.name).empty());
        EXPECT_EQ(no_sources().list(spec.name), given.list(spec.name));
        break;
      case OptionKind::text:
        EXPECT_EQ(no_sources().text(spec.name), spec.default_text);
        break;
    }
    EXPECT_EQ(no_sources().given(spec.name), std::nullopt);
  }
}

TEST(OptionTable, SettingsWithNoSourcesHoldTheTablesDefaults) {
  const auto s = read_serve_settings(sources({}));
  const auto text = [](const char* name) { return option_spec(name).default_text; };
  const auto duration = [&](const char* name) { return *parse_duration(text(name)); };
  const auto integer = [&](const char* name) { return parse_integer(text(name)); };
  EXPECT_EQ(s.store.results_repo, text("results-repo"));
  EXPECT_EQ(s.store.runs_dir, text("runs-dir"));
  EXPECT_EQ(s.store.git_timeout, duration("git-timeout"));
  EXPECT_EQ(s.store.checkpoint_exclude, no_sources().list("checkpoint-exclude"));
  EXPECT_EQ(s.store.restore_limits.max_bytes, integer("restore-max-bytes"));
  EXPECT_EQ(s.store.restore_limits.max_files, integer("restore-max-files"));
  EXPECT_EQ(s.store.max_attempts, integer("max-attempts"));
  EXPECT_EQ(s.store.max_interruptions, integer("max-interruptions"));
  EXPECT_EQ(s.store.max_interruptions, 50);
  EXPECT_EQ(s.grace_period, duration("grace-period"));
  EXPECT_EQ(s.flush_window, duration("flush-window"));
  EXPECT_EQ(s.checkpoint_interval, duration("checkpoint-interval"));
  EXPECT_EQ(s.max_concurrent, integer("max-concurrent"));
  EXPECT_EQ(s.max_queued, integer("max-queued"));
  EXPECT_EQ(s.max_connections, integer("max-connections"));
  EXPECT_EQ(s.listen_host + ":" + std::to_string(s.listen_port), text("listen"));
  // The restore limits' one home is TreeLimits: the table takes them from there.
  EXPECT_EQ(s.store.restore_limits.max_bytes, checkpoint::TreeLimits{}.max_bytes);
  EXPECT_EQ(s.store.restore_limits.max_files, checkpoint::TreeLimits{}.max_files);
}

TEST(OptionTable, NamesVariablesAndKeysFollowOneRule) {
  std::set<std::string> names;
  for (const auto& spec : option_table()) {
    SCOPED_TRACE(spec.name);
    EXPECT_TRUE(names.insert(spec.name).second) << "twice in the table";
    std::string env = "INFLIGHT_", key;
    for (char c : spec.name) {
      env += c == '-' ? '_' : static_cast<char>(std::toupper(c));
      key += c == '-' ? '_' : c;
    }
    EXPECT_EQ(spec.env_name(), env);
    EXPECT_EQ(spec.file_key(), key);
    EXPECT_EQ(option_by_file_key(key), &spec);
    EXPECT_FALSE(spec.type_word.empty());
    EXPECT_FALSE(spec.help.empty());
    if (spec.kind == OptionKind::integer) {
      EXPECT_LE(spec.min, spec.max);
    }
  }
  EXPECT_THROW(option_spec("grace-periods"), std::logic_error);
}

TEST(OptionTable, HelpShowsTheDefaultAndTheVariable) {
  EXPECT_EQ(help_text(option_spec("grace-period")),
            "the whole shutdown budget (default 30s; env INFLIGHT_GRACE_PERIOD)");
  EXPECT_EQ(option_spec("grace-period").type_word, "DURATION");
  EXPECT_EQ(option_spec("max-concurrent").type_word, "N");
  EXPECT_EQ(option_spec("listen").type_word, "HOST:PORT");
  const auto listen = help_text(option_spec("listen"));
  EXPECT_TRUE(contains(listen, "(default 127.0.0.1:3117; env INFLIGHT_LISTEN)")) << listen;
  // Without a default, only the variable; the help says what unset means.
  const auto pod = help_text(option_spec("pod-name"));
  EXPECT_FALSE(contains(pod, "default")) << pod;
  EXPECT_TRUE(contains(pod, "the host name (env INFLIGHT_POD_NAME)")) << pod;
}

TEST(OptionTable, GroupsGiveEachCommandItsOptions) {
  const auto names = [](OptionGroup group) {
    std::set<std::string> out;
    for (const auto* spec : options_of(group)) out.insert(spec->name);
    return out;
  };
  EXPECT_TRUE(names(OptionGroup::store).count("results-repo"));
  EXPECT_TRUE(names(OptionGroup::run).count("flush-window"));
  EXPECT_FALSE(names(OptionGroup::run).count("listen"));
  EXPECT_TRUE(names(OptionGroup::serve).count("listen"));
  EXPECT_EQ(names(OptionGroup::store).size() + names(OptionGroup::run).size() +
                names(OptionGroup::serve).size(),
            option_table().size());
}

TEST(OptionTable, TheClaimLeaseIsTwiceTheGitTimeout) {
  const auto store = read_store_settings(sources({}));
  EXPECT_EQ(checkpoint::claim_lease_for(store.git_timeout), std::chrono::seconds(120));
  EXPECT_EQ(checkpoint::claim_lease_for(Duration(2'500)), std::chrono::seconds(4));
}

// ---------------------------------------------------------------- combinations

TEST(ServeSettings, PushMarginIsFivePercentOfTheGracePeriodAndAtLeastOneSecond) {
  EXPECT_EQ(push_margin(Duration(30'000)), Duration(1'500));
  EXPECT_EQ(push_margin(Duration(60'000)), Duration(3'000));
  EXPECT_EQ(push_margin(Duration(10'000)), Duration(1'000));
  EXPECT_EQ(push_margin(Duration(2'000)), Duration(1'000));
}

TEST(ServeSettings, AFlushWindowThatLeavesNoTimeToPushIsRefused) {
  // Grace 30s: the margin is 1.5s, so the flush window must stay under 28.5s.
  EXPECT_EQ(usage_error(sources({{"grace-period", "30s"}, {"flush-window", "28499ms"}})),
            "<accepted>");
  const auto message = usage_error(sources({{"grace-period", "30s"}, {"flush-window", "28500ms"}}));
  EXPECT_TRUE(contains(message, "--flush-window 28500ms")) << message;
  EXPECT_TRUE(contains(message, "--grace-period 30s")) << message;
  EXPECT_TRUE(contains(message, "under 28500ms")) << message;
  // Grace 10s: the margin is its floor, 1s.
  EXPECT_EQ(usage_error(sources({{"grace-period", "10s"}, {"flush-window", "8999ms"}})),
            "<accepted>");
  EXPECT_NE(usage_error(sources({{"grace-period", "10s"}, {"flush-window", "9s"}})), "<accepted>");
  // Whatever the source, and for resume as for serve.
  EXPECT_NE(usage_error(sources({}, {{"INFLIGHT_FLUSH_WINDOW", "30s"}})), "<accepted>");
  EXPECT_NE(usage_error(sources({}, {}, {{"grace_period", "2s"}})), "<accepted>");
  EXPECT_THROW(read_resume_settings(sources({{"flush-window", "29s"}})), UsageError);
}

// A publish looks at layout 2's archive, then creates its result ref, within one git step: a
// result ref kept a shorter time after its fold could go in between.
TEST(ServeSettings, AResultRefRetentionShorterThanAGitStepIsRefused) {
  const auto message =
      usage_error(sources({{"git-timeout", "60s"}, {"results-ref-retention", "59s"}}));
  EXPECT_TRUE(contains(message, "--results-ref-retention: '59s'")) << message;
  EXPECT_TRUE(contains(message, "--git-timeout '60s'")) << message;
  EXPECT_EQ(usage_error(sources({{"git-timeout", "8s"}, {"results-ref-retention", "8s"}})),
            "<accepted>");
  EXPECT_EQ(read_serve_settings(sources({})).store.results_ref_retention, std::chrono::minutes(10));
}

// A new results repo's layout is 2 unless told 1; anything else names the word.
TEST(ServeSettings, AResultsLayoutIsOneOrTwo) {
  EXPECT_EQ(read_serve_settings(sources({})).store.results_layout, 2);
  EXPECT_EQ(read_serve_settings(sources({{"results-layout", "1"}})).store.results_layout, 1);
  EXPECT_EQ(usage_error(sources({{"results-layout", "v2"}})),
            "--results-layout: 'v2' is not 1 or 2");
}

}  // namespace
}  // namespace inflight
