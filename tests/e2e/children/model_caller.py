"""An eval with no resume of its own that pays for model calls, as a tool
whose `resume_argv` is empty is (SPEC §13): every attempt starts over from
case 0, so that only inflight's model-call journal keeps a later attempt
from paying again for what an earlier one asked.

    model_caller.py --output DIR --cases N [--stream] [--api chat|responses|messages]
                    [--attempt N] [--raw] [--dump-proc] [--extra-credentials]
                    [--retries N] [--prompt-prefix P]

The base URL and the key come from the environment, as the providers' SDKs
take them: OPENAI_BASE_URL (ending in /v1) and OPENAI_API_KEY for chat and
responses (POST $OPENAI_BASE_URL/chat/completions or /responses, `Authorization:
Bearer KEY`), ANTHROPIC_BASE_URL (without /v1) and ANTHROPIC_API_KEY for
messages (POST $ANTHROPIC_BASE_URL/v1/messages, `x-api-key: KEY`,
`anthropic-version: 2023-06-01`). For each case i it makes one call whose
last user message is "case-i", over one HTTP/1.1 keep-alive connection, reads
the whole answer (a stream to its terminal event and its end), and appends
{"case": i, "answer": TEXT, "attempt": N, "tries": [...], "retry_after": ...}
to DIR/index.jsonl, flushed at once: "tries" holds each try's status (or
"broken" for an answer cut short), "retry_after" the Retry-After header of
the last try that was not 200 (null when none). N is --attempt (a template
passes "{attempt}"), else $INFLIGHT_ATTEMPT, else null.

--raw          also writes each answer's body bytes, as read, to
               DIR/raw/a<attempt>-case-<i>.bin (a stream: its events)
--dump-proc    first writes DIR/proc.json: its own /proc environ and cmdline
               and those of its parent chain (or why they could not be read),
               for the tests that look for the provider's key
--extra-credentials  also sends its key as `x-api-key`, `api-key` and a
               cookie (chat and responses), which must not go upstream
--retries N    as an SDK does: a call answered with a status other than 200,
               or whose answer was cut short (a stream without its terminal
               event, a connection closed mid-answer), is made again, on a new
               connection, up to N more times; the last try counts
--prompt-prefix P  prompts are "P" + "case-i" (runs of one test told apart)

An answer that is not 200, or a stream without its terminal event, once
its retries are spent, ends it with exit code 1 (stderr says why). SIGTERM ends it at once (default
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
retries = int(arg("--retries", "0"))
prefix = arg("--prompt-prefix", "")


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
        """(status, body bytes, Retry-After header)."""
        for retry in (False, True):
            fresh = self.conn is None
            if fresh:
                self.conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=300)
            try:
                self.conn.request("POST", path, body, headers)
                response = self.conn.getresponse()
                return response.status, response.read(), response.getheader("Retry-After")
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.conn.close()
                self.conn = None
                # An idle keep-alive connection the server closed: once, on a
                # connection that had served a call before, as HTTP clients do.
                if fresh or retry:
                    raise
        raise AssertionError("unreachable")

    def drop(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


if "--dump-proc" in sys.argv:
    dump_proc()
caller = Caller()
with open(out / "index.jsonl", "a") as index:
    for i in range(cases):
        tries, retry_after = [], None
        for try_number in range(retries + 1):
            last = try_number == retries
            try:
                status, raw, retry_header = caller.call(request_body(f"{prefix}case-{i}"))
            except (http.client.HTTPException, OSError) as e:
                # Cut short mid-answer (IncompleteRead), or the connection closed.
                caller.drop()
                tries.append("broken")
                if last:
                    sys.exit(f"case-{i}: {type(e).__name__}: {e}")
                continue
            if raw_dir is not None:
                raw_dir.mkdir(exist_ok=True)
                (raw_dir / f"a{attempt}-case-{i}.bin").write_bytes(raw)
            if status != 200:
                tries.append(status)
                retry_after = retry_header
                if last:
                    sys.exit(f"case-{i}: HTTP {status}: {raw[:500]!r}")
                continue
            try:
                text = answer_of(raw)
            except (ValueError, KeyError, TypeError) as e:
                tries.append("broken")
                caller.drop()
                if last:
                    sys.exit(f"case-{i}: {e}: {raw[:500]!r}")
                continue
            tries.append(status)
            break
        index.write(json.dumps({"case": i, "answer": text, "attempt": attempt, "tries": tries,
                                "retry_after": retry_after}) + "\n")
        index.flush()
