#include "placeholders.hpp"

#include <cctype>

namespace inflight {

namespace {

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Calls on_text for literal runs and on_name for placeholders.
void scan(const std::string& text, const std::function<void(const std::string&)>& on_text,
          const std::function<void(const std::string&)>& on_name) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto open = text.find('{', pos);
    if (open == std::string::npos) break;
    auto close = open + 1;
    while (close < text.size() && is_name_char(text[close])) ++close;
    if (close == open + 1 || close >= text.size() || text[close] != '}') {
      on_text(text.substr(pos, open + 1 - pos));
      pos = open + 1;
      continue;
    }
    on_text(text.substr(pos, open - pos));
    on_name(text.substr(open + 1, close - open - 1));
    pos = close + 1;
  }
  on_text(text.substr(pos));
}

}  // namespace

std::vector<std::string> placeholder_names(const std::string& text) {
  std::vector<std::string> names;
  scan(
      text, [](const std::string&) {}, [&](const std::string& name) { names.push_back(name); });
  return names;
}

std::string substitute(const std::string& text,
                       const std::function<std::string(const std::string&)>& lookup) {
  std::string out;
  scan(
      text, [&](const std::string& literal) { out += literal; },
      [&](const std::string& name) { out += lookup(name); });
  return out;
}

}  // namespace inflight
