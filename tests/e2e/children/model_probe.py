"""A child that tries to reach a model it should not, or with a token it
should not hold (SPEC §13 "Keys"): through the model URL and token of its
attempt ($OPENAI_BASE_URL, $OPENAI_API_KEY: ".../models/openai/v1" and
"{model_key}") it sends one call each

    own       its own token, to its own model (the control: 200)
    wrong     a made-up token (401)
    none      no Authorization header (401)
    unnamed   its own token, to a model of the config its template does not
              name (/models/anthropic/..., as x-api-key and as Bearer: 404)
    unknown   its own token, to a model no config has (/models/nosuch: 404)
    foreign   the token in --foreign-token-file, another run's whose attempt
              ended (401), when given
    upgrade   with --upgrade: its own token, a WebSocket upgrade as the
              realtime APIs open one (GET .../v1/realtime?model=..., Upgrade:
              websocket, Connection: Upgrade, Sec-WebSocket-Key/-Version): 400
    upgrade_post  with --upgrade: its own token, a chat call (prompt
              "probe-upgrade") that also asks for an upgrade (Upgrade:
              websocket, Connection: Upgrade): 400

and writes {"base_url", "statuses": {name: status}, "bodies": {name: the
answer's first 300 characters}} to DIR/probe.json, and its own token to
DIR/token (for the test's next run to use as a foreign one). Every call has a
connection of its own. Exits 0.

    model_probe.py --output DIR [--foreign-token-file PATH] [--upgrade]
"""
import base64
import http.client
import json
import os
import secrets
import sys
import urllib.parse
from pathlib import Path

out = Path(sys.argv[sys.argv.index("--output") + 1])
foreign_file = (sys.argv[sys.argv.index("--foreign-token-file") + 1]
                if "--foreign-token-file" in sys.argv else None)
base = os.environ["OPENAI_BASE_URL"].rstrip("/")
token = os.environ["OPENAI_API_KEY"]
(out / "token").write_text(token)
url = urllib.parse.urlsplit(base)
marker = "/models/openai/"
assert marker in url.path + "/", f"unexpected model URL {base}"
prefix = url.path[:url.path.index(marker)]  # "" unless the listener has a path prefix


def post(path, headers, body, method="POST"):
    conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=30)
    try:
        data = None if body is None else json.dumps(body).encode()
        kind = {} if body is None else {"Content-Type": "application/json"}
        conn.request(method, path, data, {**kind, "Connection": "close", **headers})
        response = conn.getresponse()
        return response.status, response.read().decode(errors="replace")[:300]
    finally:
        conn.close()


def chat(text):
    return {"model": "fake-model", "messages": [{"role": "user", "content": text}]}


calls = {
    "own": (url.path + "/chat/completions", {"Authorization": f"Bearer {token}"},
            chat("probe-own")),
    "wrong": (url.path + "/chat/completions",
              {"Authorization": f"Bearer sk-wrong-{secrets.token_hex(16)}"}, chat("probe-wrong")),
    "none": (url.path + "/chat/completions", {}, chat("probe-none")),
    "unnamed": (prefix + "/models/anthropic/v1/messages",
                {"x-api-key": token, "Authorization": f"Bearer {token}",
                 "anthropic-version": "2023-06-01"},
                {"model": "fake-claude", "max_tokens": 16,
                 "messages": [{"role": "user", "content": "probe-unnamed"}]}),
    "unknown": (prefix + "/models/nosuch/v1/chat/completions",
                {"Authorization": f"Bearer {token}"}, chat("probe-unknown")),
}
if foreign_file:
    foreign = Path(foreign_file).read_text().strip()
    calls["foreign"] = (url.path + "/chat/completions", {"Authorization": f"Bearer {foreign}"},
                        chat("probe-foreign"))

if "--upgrade" in sys.argv:
    websocket = {"Authorization": f"Bearer {token}", "Upgrade": "websocket",
                 "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
                 "Sec-WebSocket-Key": base64.b64encode(secrets.token_bytes(16)).decode()}
    calls["upgrade"] = (url.path + "/realtime?model=fake-realtime", websocket, None, "GET")
    calls["upgrade_post"] = (url.path + "/chat/completions",
                             {"Authorization": f"Bearer {token}", "Upgrade": "websocket",
                              "Connection": "Upgrade"}, chat("probe-upgrade"))

statuses, bodies = {}, {}
for name, (path, headers, body, *method) in calls.items():
    statuses[name], bodies[name] = post(path, headers, body, *method)
(out / "probe.json").write_text(json.dumps({"base_url": base, "statuses": statuses,
                                             "bodies": bodies}))
