"""An eval with no resume of its own that pays for model calls, as a tool
whose `resume_argv` is empty is (SPEC §13): every attempt starts over from
case 0, so that only inflight's model-call journal keeps a later attempt
from paying again for what an earlier one asked.

    model_caller.py --output DIR --cases N [--stream] [--api chat|responses|messages]
                    [--attempt N] [--raw] [--dump-proc] [--extra-credentials]

The base URL and the key come from the environment, as the providers' SDKs
take them: OPENAI_BASE_URL (ending in /v1) and OPENAI_API_KEY for chat and
responses (POST $OPENAI_BASE_URL/chat/completions or /responses, `Authorization:
Bearer KEY`), ANTHROPIC_BASE_URL (without /v1) and ANTHROPIC_API_KEY for
messages (POST $ANTHROPIC_BASE_URL/v1/messages, `x-api-key: KEY`,
`anthropic-version: 2023-06-01`). For each case i it makes one call whose
last user message is "case-i", over one HTTP/1.1 keep-alive connection, reads
the whole answer (a stream to its terminal event and its end), and appends
{"case": i, "answer": TEXT, "attempt": N} to DIR/index.jsonl, flushed at
once. N is --attempt (a template passes "{attempt}"), else $INFLIGHT_ATTEMPT,
else null.

--raw          also writes each answer's body bytes, as read, to
               DIR/raw/a<attempt>-case-<i>.bin (a stream: its events)
--dump-proc    first writes DIR/proc.json: its own /proc environ and cmdline
               and those of its parent chain (or why they could not be read),
               for the tests that look for the provider's key
--extra-credentials  also sends its key as `x-api-key`, `api-key` and a
               cookie (chat and responses), which must not go upstream

An answer that is not 200, or a stream without its terminal event, ends it
with exit code 1 (stderr says why). SIGTERM ends it at once (default
disposition), whatever call is in flight.
"""
import http.client
import json
import os
import sys
import urllib.parse
from pathlib import Path


def arg(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


out = Path(arg("--output"))
cases = int(arg("--cases", "1"))
api = arg("--api", "chat")
stream = "--stream" in sys.argv
attempt = arg("--attempt", os.environ.get("INFLIGHT_ATTEMPT"))
attempt = int(attempt) if attempt not in (None, "") else None
raw_dir = out / "raw" if "--raw" in sys.argv else None


def read_proc(path):
    try:
        return Path(path).read_bytes().decode("latin-1"), None
    except OSError as e:
        return None, type(e).__name__


def dump_proc():
    own_environ, _ = read_proc("/proc/self/environ")
    own_cmdline, _ = read_proc("/proc/self/cmdline")
    parents, pid = [], os.getppid()
    while pid > 1:
        environ, environ_error = read_proc(f"/proc/{pid}/environ")
        cmdline, _ = read_proc(f"/proc/{pid}/cmdline")
        parents.append({"pid": pid, "cmdline": cmdline, "environ": environ,
                        "environ_error": environ_error})
        stat, _ = read_proc(f"/proc/{pid}/stat")
        pid = int(stat.rsplit(")", 1)[1].split()[1]) if stat else 0
    (out / "proc.json").write_text(json.dumps({"environ": own_environ, "cmdline": own_cmdline,
                                                "parents": parents}))


if api == "messages":
    base, key = os.environ["ANTHROPIC_BASE_URL"], os.environ.get("ANTHROPIC_API_KEY", "")
    path_suffix = "/v1/messages"
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
else:
    base, key = os.environ["OPENAI_BASE_URL"], os.environ.get("OPENAI_API_KEY", "")
    path_suffix = {"chat": "/chat/completions", "responses": "/responses"}[api]
    headers = {"Authorization": f"Bearer {key}"}
    if "--extra-credentials" in sys.argv:
        headers |= {"x-api-key": key, "api-key": key, "Cookie": f"session={key}"}
headers["Content-Type"] = "application/json"
url = urllib.parse.urlsplit(base.rstrip("/") + path_suffix)
path = url.path + (f"?{url.query}" if url.query else "")


def request_body(text):
    if api == "chat":
        body = {"model": "fake-model", "messages": [
            {"role": "system", "content": "Answer the test case."},
            {"role": "user", "content": text}]}
        if stream:
            body |= {"stream": True, "stream_options": {"include_usage": True}}
    elif api == "responses":
        body = {"model": "fake-model", "input": [{"role": "user", "content": text}]}
        if stream:
            body["stream"] = True
    else:
        body = {"model": "fake-claude", "max_tokens": 64,
                "messages": [{"role": "user", "content": text}]}
        if stream:
            body["stream"] = True
    return json.dumps(body).encode()


def sse_data(raw):
    """(event name, data text) of each event of a stream."""
    for block in raw.decode().replace("\r\n", "\n").split("\n\n"):
        event, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        if data:
            yield event, "\n".join(data)


def answer_of(raw):
    """The answer's text; raises ValueError for a stream without its end."""
    if not stream:
        body = json.loads(raw)
        if api == "chat":
            return body["choices"][0]["message"]["content"]
        if api == "responses":
            return "".join(part["text"] for item in body["output"] if item["type"] == "message"
                           for part in item["content"] if part["type"] == "output_text")
        return "".join(block["text"] for block in body["content"] if block["type"] == "text")
    text, ended = "", False
    for event, data in sse_data(raw):
        if api == "chat":
            if data == "[DONE]":
                ended = True
                continue
            for choice in json.loads(data)["choices"]:
                text += choice["delta"].get("content") or ""
        elif api == "responses":
            item = json.loads(data)
            if item["type"] == "response.output_text.delta":
                text += item["delta"]
            elif item["type"] == "response.completed":
                ended = True
        else:
            item = json.loads(data)
            if item["type"] == "content_block_delta" and item["delta"]["type"] == "text_delta":
                text += item["delta"]["text"]
            elif item["type"] == "message_stop":
                ended = True
    if not ended:
        raise ValueError("the stream ended without its terminal event")
    return text


class Caller:
    """One keep-alive connection, opened again when the server closed it."""

    def __init__(self):
        self.conn = None

    def call(self, body):
        for retry in (False, True):
            fresh = self.conn is None
            if fresh:
                self.conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=300)
            try:
                self.conn.request("POST", path, body, headers)
                response = self.conn.getresponse()
                return response.status, response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.conn.close()
                self.conn = None
                # An idle keep-alive connection the server closed: once, on a
                # connection that had served a call before, as HTTP clients do.
                if fresh or retry:
                    raise
        raise AssertionError("unreachable")


if "--dump-proc" in sys.argv:
    dump_proc()
caller = Caller()
with open(out / "index.jsonl", "a") as index:
    for i in range(cases):
        status, raw = caller.call(request_body(f"case-{i}"))
        if raw_dir is not None:
            raw_dir.mkdir(exist_ok=True)
            (raw_dir / f"a{attempt}-case-{i}.bin").write_bytes(raw)
        if status != 200:
            sys.exit(f"case-{i}: HTTP {status}: {raw[:500]!r}")
        try:
            text = answer_of(raw)
        except (ValueError, KeyError, TypeError) as e:
            sys.exit(f"case-{i}: {e}: {raw[:500]!r}")
        index.write(json.dumps({"case": i, "answer": text, "attempt": attempt}) + "\n")
        index.flush()
