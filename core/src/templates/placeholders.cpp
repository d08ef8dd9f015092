#include "placeholders.hpp"

#include <cctype>

namespace inflight {

namespace {

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// A model's name, after `model_url:`, may also hold '-' and '.'.
bool is_model_name_char(char c) {
  return is_name_char(c) || c == '-' || c == '.';
}

// Where the name that starts at `begin` ends: a plain name, or
// `model_url:` and a model's name.
std::size_t name_end(const std::string& text, std::size_t begin) {
  auto end = begin;
  while (end < text.size() && is_name_char(text[end])) ++end;
  const std::string_view prefix = kModelUrlPrefix;
  if (text.compare(begin, end - begin, prefix.substr(0, prefix.size() - 1)) != 0 ||
      end >= text.size() || text[end] != ':')
    return end;
  for (++end; end < text.size() && is_model_name_char(text[end]);) ++end;
  return end;
}

// Calls on_text for literal runs and on_name for placeholders.
void scan(const std::string& text, const std::function<void(const std::string&)>& on_text,
          const std::function<void(const std::string&)>& on_name) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto open = text.find('{', pos);
    if (open == std::string::npos) break;
    const auto close = name_end(text, open + 1);
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
