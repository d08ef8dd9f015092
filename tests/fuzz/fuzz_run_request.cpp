// The body of `POST /runs` on any bytes, as serve reads it: parsed within
// the bounds of bounded_json.hpp, judged by a child template's params
// (child_template.hpp), and rendered into argv when accepted. Any client may
// send it. A body is refused with the param at fault, or renders; an
// accepted one never throws in render, and no argument carries a NUL byte
// (execve would cut it).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "inflight/core/bounded_json.hpp"
#include "inflight/core/child_template.hpp"

namespace {

// The agentv example's template (examples/agentv/inflight.json), whose params cover each type:
// a string with a pattern, an integer with bounds, an array of strings in an optional group.
const inflight::ChildTemplate& agentv_template() {
  static const auto child = inflight::ChildTemplate::parse(inflight::OrderedJson::parse(R"({
    "argv": ["agentv", "eval", "run", "{suite}", "--output", "{output_dir}",
             "--target", "{target}", "--workers", "{workers}"],
    "optional": {"test_ids": ["--test-id", "{test_ids}"]},
    "resume_argv": ["--resume"],
    "params": {
      "suite": {"type": "string", "default": "evals/arithmetic.eval.yaml",
                "pattern": "^evals/[A-Za-z0-9_-]+\\.eval\\.yaml$"},
      "target": {"type": "string", "default": "local_agent", "pattern": "^[A-Za-z0-9_-]+$"},
      "workers": {"type": "integer", "min": 1, "max": 50, "default": 2},
      "test_ids": {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z0-9_*-]+$"}}
    }})"));
  return child;
}

void judge(const inflight::ChildTemplate& child, const inflight::OrderedJson& request) {
  if (const auto refused = child.validate(request)) {
    if (refused->message.empty()) std::abort();
    return;
  }
  const inflight::RenderContext context{.run_id = "fuzz", .output_dir = "/runs/fuzz"};
  for (const bool resume : {false, true}) {
    auto with_resume = context;
    with_resume.resume = resume;
    for (const auto& arg : child.render(request, with_resume))
      if (arg.find('\0') != std::string::npos) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto request = inflight::parse_bounded_json(body, {});
  if (!request) return 0;
  // RunSupervisor::submit takes the run's id and its template's name out before the template
  // judges the rest.
  if (request->is_object()) {
    request->erase("id");
    request->erase("child");
  }
  static const auto demo = inflight::ChildTemplate::demo("/usr/libexec/inflight/demo-eval");
  judge(demo, *request);
  judge(agentv_template(), *request);
  return 0;
}
