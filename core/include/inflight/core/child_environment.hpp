// What environment each process serve starts gets (docs/security.md "Secrets and children"). A
// child gets a small base, the variables its template lists in `inherit_env`, and its template's
// `env`: never the whole environment of serve, which holds inflight's tokens and every template's
// `${NAME}` secrets.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "inflight/core/child_template.hpp"

namespace inflight {

// PATH, HOME, USER, LANG, LC_*, TZ, TMPDIR: what every child gets from
// serve's environment when serve has it.
bool is_base_variable(std::string_view name);

// The environment of one attempt, as NAME=value entries, from serve's
// environment `serve_env` (a null-terminated block like environ): the base,
// the template's `inherit_env`, then its `env` with `${NAME}` resolved from
// `serve_env` (an unset one is empty; INFLIGHT_* never resolves).
std::vector<std::string> child_environment(const char* const* serve_env, const ChildTemplate& child,
                                           const RenderContext& context);

// The environment of the checkpoint agent, a helper of inflight's own that
// gets its secrets on its stdin: the base and what libgit2, OpenSSL and the
// sanitizers read (proxies, SSL_CERT_FILE/DIR, LD_LIBRARY_PATH, LD_PRELOAD,
// *SAN_OPTIONS, libfaketime's FAKETIME*),
// nothing else of serve's: an agent is readable in /proc while it starts.
std::vector<std::string> agent_environment(const char* const* serve_env);

}  // namespace inflight
