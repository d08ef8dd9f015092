// The status page of serve (GET /, docs/serve.md "Status page"): one HTML document
// for a person, embedded at build time, answered without the API token
// because it holds no data; its script reads the API with the token.
#pragma once

#include <string_view>

#include "inflight/supervisor/http/http_server.hpp"

namespace inflight {

// status_page.html as built into the binary (generated: status_page_html.cpp.in).
struct EmbeddedPage {
  std::string_view html{};
  std::string_view script_hash{};  // CSP source of its inline script: 'sha256-...'
  std::string_view style_hash{};   // and of its inline style
};

const EmbeddedPage& embedded_status_page();

// 200 with the page, its Content-Security-Policy and no caching.
HttpResponse status_page(unsigned version);

}  // namespace inflight
