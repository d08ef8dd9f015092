"""A child that makes the model calls a test lists, one after the other or
some at once, and writes down what each got (SPEC §13): for the tests where
model_caller.py's eval loop is too rigid (several models in one run, headers
of the test's choosing, two calls in flight at once).

    model_calls.py --output DIR --plan FILE [--results NAME]

FILE is JSON: {"steps": [STEP, ...]}, done in order. A step is one of

    {"call": NAME, "model": "openai", "api": "chat"|"responses"|"messages",
     "prompt": TEXT, "stream": false, "auth": "bearer"|"x-api-key"|"none",
     "headers": {NAME: VALUE}, "background": false, "filler_bytes": 0}
        a call to model MODEL through $MODEL_URL_<MODEL> (the template's
        "{model_url:MODEL}", MODEL upper-cased, '-' and '.' as '_'), to
        /v1/chat/completions, /v1/responses or /v1/messages, with the token
        $MODEL_KEY as `auth` says (default: bearer, or x-api-key for
        "messages"; "messages" also sends anthropic-version). In `headers`,
        "$TOKEN" stands for the token. Each call has a connection of its own
        (Connection: close). "background": true makes it in a thread of its
        own, and the next step follows at once. "filler_bytes": N adds a
        string of N bytes to the body ("filler"), for a body of a size.
    {"wait_file": NAME}
        waits (60 s at most, else exit 1) until DIR/NAME exists: the test's
        go-ahead, once it saw what it waits for.
    {"join": true}
        waits for every background call.
    {"exit": CODE}
        waits for every background call, writes the results and exits CODE
        (75, for example: a template's retry_exit_codes).

It first writes its token to DIR/token (for the test to look for it where
it must not be). Then it writes DIR/NAME (default calls.json; a template
may give calls-{attempt}.json): {CALL: {"status": S, "body": the answer's
text (first 2000 characters), "content_type": ..., "error": why no answer
came (null when one did)}}, and exits 0 whatever the statuses.
"""
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse
from pathlib import Path

out = Path(sys.argv[sys.argv.index("--output") + 1])
plan = json.loads(Path(sys.argv[sys.argv.index("--plan") + 1]).read_text())
results_name = sys.argv[sys.argv.index("--results") + 1] if "--results" in sys.argv \
    else "calls.json"
token = os.environ.get("MODEL_KEY", "")
(out / "token").write_text(token)
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
results = {}
lock = threading.Lock()


def base_url(model):
    name = "MODEL_URL_" + model.upper().replace("-", "_").replace(".", "_")
    return urllib.parse.urlsplit(os.environ[name].rstrip("/"))


def body_of(step):
    api, text = step.get("api", "chat"), step["prompt"]
    if api == "responses":
        body = {"model": "fake-model", "input": [{"role": "user", "content": text}]}
    elif api == "messages":
        body = {"model": "fake-claude", "max_tokens": 64,
                "messages": [{"role": "user", "content": text}]}
    else:
        body = {"model": "fake-model", "messages": [{"role": "user", "content": text}]}
    if step.get("stream"):
        body["stream"] = True
    if step.get("filler_bytes"):
        body["filler"] = "x" * step["filler_bytes"]
    return json.dumps(body).encode()


def call(step):
    api = step.get("api", "chat")
    url = base_url(step.get("model", "openai"))
    auth = step.get("auth", "x-api-key" if api == "messages" else "bearer")
    headers = {"Content-Type": "application/json", "Connection": "close"}
    if auth == "bearer":
        headers["Authorization"] = f"Bearer {token}"
    elif auth == "x-api-key":
        headers["x-api-key"] = token
    if api == "messages":
        headers["anthropic-version"] = "2023-06-01"
    for name, value in step.get("headers", {}).items():
        headers[name] = value.replace("$TOKEN", token)
    result = {"status": None, "body": None, "content_type": None, "error": None}
    conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=120)
    try:
        # skip_accept_encoding: a test's own Accept-Encoding, if any, is the
        # one sent.
        conn.putrequest("POST", url.path + PATHS[api], skip_accept_encoding=True)
        data = body_of(step)
        headers["Content-Length"] = str(len(data))
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders(data)
        response = conn.getresponse()
        result["status"] = response.status
        result["content_type"] = response.getheader("Content-Type")
        result["body"] = response.read().decode(errors="replace")[:2000]
    except (http.client.HTTPException, OSError) as e:
        result["error"] = f"{type(e).__name__}: {e}"
    finally:
        conn.close()
    with lock:
        results[step["call"]] = result


threads = []
for step in plan["steps"]:
    if "call" in step:
        if step.get("background"):
            thread = threading.Thread(target=call, args=(step,))
            thread.start()
            threads.append(thread)
        else:
            call(step)
    elif "wait_file" in step:
        deadline = time.monotonic() + 60
        while not (out / step["wait_file"]).exists():
            if time.monotonic() > deadline:
                sys.exit(f"no {step['wait_file']} in 60 s")
            time.sleep(0.02)
    elif step.get("join") or "exit" in step:
        for thread in threads:
            thread.join()
        threads = []
        if "exit" in step:
            break
for thread in threads:
    thread.join()
(out / results_name).write_text(json.dumps(results))
sys.exit(next((step["exit"] for step in plan["steps"] if "exit" in step), 0))
