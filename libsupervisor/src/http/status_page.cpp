// Answers GET / with the embedded status page and the headers that keep it
// self-contained: a CSP that lets only its own inline script and style run
// and lets it talk only to this serve, no caching, no framing (every answer
// of the API says nosniff).
#include "http/status_page.hpp"

#include <boost/beast/http.hpp>
#include <string>

namespace inflight {

namespace http = boost::beast::http;

namespace {

std::string content_security_policy(const EmbeddedPage& page) {
  return "default-src 'none'; script-src " + std::string(page.script_hash) + "; style-src " +
         std::string(page.style_hash) +
         "; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
         "frame-ancestors 'none'";
}

}  // namespace

HttpResponse status_page(unsigned version) {
  static const std::string policy = content_security_policy(embedded_status_page());
  HttpResponse response{http::status::ok, version};
  response.set(http::field::content_type, "text/html; charset=utf-8");
  response.set("Content-Security-Policy", policy);
  response.set(http::field::cache_control, "no-store");
  response.set("Referrer-Policy", "no-referrer");
  response.body() = std::string(embedded_status_page().html);
  return response;
}

}  // namespace inflight
