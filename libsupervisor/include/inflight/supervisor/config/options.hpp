// The one table of inflight's options: each option's flag, environment
// variable, config key, value type, default, range, help and commands are
// written here once. The settings readers, the config file check and --help
// all read this table, so a default cannot differ between them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace inflight {

// Which commands take an option: store options every command, run options
// serve and resume, serve options serve only.
enum class OptionGroup { store, run, serve };

// How an option's text (given or default) is read.
enum class OptionKind { text, duration, integer, list };

struct OptionSpec {
  std::string name;  // the flag without its dashes: grace-period
  OptionGroup group;
  OptionKind kind;
  std::string type_word;  // what --help shows for the value: DURATION, N, URL…
  // Read by the same parser as a given value; empty: none (the help says
  // what an unset value means).
  std::string default_text;
  std::string help;
  std::int64_t min = 0;  // integer options only
  std::int64_t max = 0;

  std::string flag() const { return "--" + name; }
  std::string env_name() const;  // INFLIGHT_GRACE_PERIOD
  std::string file_key() const;  // grace_period
};

// Every option, in the order --help shows them.
const std::vector<OptionSpec>& option_table();
// The option named `name` (without dashes); std::logic_error when the table
// has none, a mistake in the code and not in the user's input.
const OptionSpec& option_spec(std::string_view name);
// The options that `group` adds to a command.
std::vector<const OptionSpec*> options_of(OptionGroup group);
// The option whose config key is `key`, or null.
const OptionSpec* option_by_file_key(std::string_view key);
// `the whole shutdown budget (default 30s; env INFLIGHT_GRACE_PERIOD)`.
std::string help_text(const OptionSpec& spec);

}  // namespace inflight
