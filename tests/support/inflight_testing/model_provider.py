"""A fake model provider for the model-call journal's tests (SPEC §13): a real
HTTP/1.1 server on 127.0.0.1 (keep-alive, chunked streams) that speaks just
enough of the OpenAI and Anthropic APIs for an eval's calls, and keeps a
ledger of the calls it was paid for, so that a test can count what a run
cost.

    with ModelProvider(api_key="sk-test-...", delay=0.3) as provider:
        ... provider.url ...                      # http://127.0.0.1:PORT
        assert provider.paid("case-3") == 1       # calls whose prompt is "case-3"

Over TLS: ModelProvider(ssl_context=ctx), ctx an ssl.SSLContext for the
server side (its cert chain loaded); provider.url is then https://127.0.0.1:PORT
(a test names the host its cert is for, e.g. https://localhost:PORT), the
handshake is made by each connection's thread, a failed one is counted in
tls_failures() and never reaches a handler, and the server names the clients
sent in SNI are in sni_names().

Endpoints (POST, JSON bodies):

    /v1/chat/completions  OpenAI chat; auth `Authorization: Bearer KEY`.
                          "stream": true sends chat.completion.chunk events,
                          a last chunk with "usage" when
                          "stream_options": {"include_usage": true}, and
                          always `data: [DONE]`.
    /v1/responses         OpenAI responses; auth as chat. A stream sends
                          response.created, response.output_text.delta...,
                          response.completed (its response.usage holds
                          input_tokens, output_tokens).
    /v1/messages          Anthropic messages; auth `x-api-key: KEY`. A stream
                          sends message_start (usage with
                          cache_read_input_tokens), content_block_start,
                          content_block_delta..., content_block_stop,
                          message_delta (usage.output_tokens), message_stop.
    GET /ledger           the ledger as JSON (no auth: a test's helper), for
                          a test that reads it from another process;
                          GET /refused the refused requests likewise.

Answers are deterministic functions of the request: the prompt is the text of
the last user message (chat, messages) or of the last input item (responses),
the answer is "answer to <prompt>", streamed a word at a time; usage is
input = number of words of the prompt + 10 and output = 7 (Anthropic's
message_start adds cache_read_input_tokens = 2, not counted in input_tokens).
Ids and timestamps are fixed, so the same request gets the same bytes twice:
a replayed answer can be compared byte for byte with the first one. With
`unique_ids=True` each answer's ids carry the call's serial number instead,
so that an answer paid again differs from a recorded one.

Every request the provider read, of any method and path, paid or not, is in
seen() (method, path with its query, headers), so that a test can assert that
nothing of some kind reached it at all.

Paid calls and refusals. A request to a known endpoint with the right key is
a paid call: it goes into the ledger whatever happens next (a fault, a client
that goes away). A wrong or missing key gets 401 and goes into refused()
(path, headers), never into the ledger. Any credential header present
(authorization, proxy-authorization, x-api-key, api-key, cookie,
x-goog-api-key) is kept with the request's headers, so that a test can assert
that no token went upstream. A request to an unknown path with the right key
gets 404 and goes into unrouted().

A ledger entry (a dict):

    serial     1, 2, ... in arrival order
    path       the path without its query; query the query string ("" if none)
    body       the request body parsed as JSON (bytes if it is not JSON)
    headers    the request headers, names lower-cased (repeated ones joined by ", ")
    peer       "HOST:PORT" of the client's end of the connection (calls on one
               kept-alive connection share it)
    prompt     the prompt text (see above); api "chat", "responses" or "messages"
    stream     whether the request asked for a stream
    started    time.monotonic() when the request had arrived whole
    ended      time.monotonic() when the provider stopped writing (None before)
    completed  whether the whole answer was written (for a stream: its
               terminal event and the chunked body's end)
    status     the status sent (None before the headers went)
    sent       the answer's body bytes written so far (a stream de-chunked:
               the SSE events exactly as a client reads them)
    fault      None, "status", "reset", "hang", "close_after", "rst_after" or
               "unanswered"
    fault_status  the status of a "status" fault
    usage      {"input_tokens", "output_tokens"} the answer reports
    answer     the answer's text
    delay      the seconds the call was given (see Delays)

Delays. A call takes `delay` seconds (the constructor's, or the attribute set
later): a plain answer is sent after it, a stream's events are spaced so
that the whole stream takes it (its headers go at once, then an event every
delay/len(events) seconds), so that a call is in flight for that long. A
delay chosen per call wins over it, in this order:
  1. the request body's "metadata": {"test_delay": SECONDS} (a body field,
     since a proxy forwards headers from an allow-list but the body as is);
  2. set_delay(SECONDS, when=PROMPT): calls whose prompt is PROMPT (the last
     rule given for a prompt wins; clear_delays() drops every rule);
  3. the header `x-test-delay: SECONDS` (for calls made straight to the
     provider).

Faults, each taken by the next paid call(s) in arrival order, first queued
first taken; with `when=PROMPT`, by the next paid call(s) whose prompt is
PROMPT only (the other calls pass it by):
  fail_next(status=429, n=1, when=None)
                                answer `status` with the API's error body
                                (429 adds Retry-After: 1)
  reset_mid_stream_next(n=1, when=None)
                                send about half the events (half the body of a
                                plain answer) then reset the connection: no
                                terminal event
  hang_next(n=1, when=None)     never answer; the call ends when the client
                                goes away or stop() is called
  close_after_next(n=1, when=None, rst=False)
                                answer in full, then close the kept-alive
                                connection as a server's idle timeout does
                                (a FIN; with rst=True an RST), before the
                                ledger entry ends
  close_unanswered_next(n=1, when=None)
                                read the request, then close the connection
                                without a byte of answer (a stale keep-alive
                                connection's race, seen from the client)

Thread-safe. stop() (or leaving the `with`) closes every connection, hung
ones included.
"""

import base64
import hashlib
import json
import socket
import ssl
import struct
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "x-api-key", "api-key", "cookie",
                      "x-goog-api-key")
OPENAI_PATHS = {"/v1/chat/completions": "chat", "/v1/responses": "responses"}
ANTHROPIC_PATHS = {"/v1/messages": "messages"}
FIXED_CREATED = 1700000000
OUTPUT_TOKENS = 7
CACHE_READ_TOKENS = 2


def _text_of(content):
    """The text of a message's content: a string, or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def prompt_of(api, body):
    """The text a test counts calls by: the last user message's (or input item's)."""
    if not isinstance(body, dict):
        return ""
    if api == "responses":
        items = body.get("input")
        if isinstance(items, str):
            return items
        if isinstance(items, list) and items and isinstance(items[-1], dict):
            return _text_of(items[-1].get("content"))
        return ""
    messages = body.get("messages")
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        return _text_of(messages[-1].get("content"))
    return ""


def sse(data, event=None):
    """One server-sent event: `event:` line (if any), `data:` line, blank line."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return ((f"event: {event}\n" if event else "") + f"data: {text}\n\n").encode()


def _jsonable(entry):
    out = dict(entry)
    if isinstance(out.get("body"), bytes):
        out["body"] = {"base64": base64.b64encode(out["body"]).decode()}
    if isinstance(out.get("sent"), bytes):
        out["sent"] = out["sent"].decode("utf-8", "replace")
    return out


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, provider):
        self.provider = provider
        self.open_connections = set()
        self.accepted = 0
        self.conn_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def get_request(self):
        sock, address = super().get_request()
        if self.provider.ssl_context is not None:
            # The handshake is the connection's thread's (finish_request), so
            # that a client that never completes one holds no other.
            sock = self.provider.ssl_context.wrap_socket(sock, server_side=True,
                                                         do_handshake_on_connect=False)
        with self.conn_lock:
            self.open_connections.add(sock)
            self.accepted += 1
        return sock, address

    def finish_request(self, request, client_address):
        if isinstance(request, ssl.SSLSocket):
            try:
                request.do_handshake()
            except (ssl.SSLError, OSError) as e:
                self.provider._tls_failed(f"{type(e).__name__}: {e}")
                return
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address):
        pass  # a client gone mid-request: nothing to tell

    def shutdown_request(self, request):
        with self.conn_lock:
            self.open_connections.discard(request)
        super().shutdown_request(request)


class _ClientGone(Exception):
    pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeModelProvider/1"

    def log_message(self, *args):  # quiet: pytest shows stderr of failed tests only anyway
        pass

    # ---- reading

    def _read_body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _headers_dict(self):
        headers = {}
        for name, value in self.headers.items():
            name = name.lower()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        return headers

    # ---- writing

    def _send_json(self, status, obj, extra=()):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def do_GET(self):
        provider = self.server.provider
        provider._saw("GET", self.path, self._headers_dict())
        path = self.path.split("?", 1)[0]
        if path == "/ledger":
            self._send_json(200, [_jsonable(e) for e in provider.ledger()])
        elif path == "/refused":
            self._send_json(200, [_jsonable(e) for e in provider.refused()])
        else:
            self._send_json(404, {"error": {"message": "not found", "type": "not_found"}})

    def do_POST(self):
        provider = self.server.provider
        path, _, query = self.path.partition("?")
        headers = self._headers_dict()
        provider._saw("POST", self.path, headers)
        raw = self._read_body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw
        anthropic = path in ANTHROPIC_PATHS
        if anthropic:
            authorized = headers.get("x-api-key") == provider.api_key
        else:
            authorized = headers.get("authorization") == f"Bearer {provider.api_key}"
        if not authorized:
            provider._refuse({"path": path, "query": query, "headers": headers, "body": body,
                              "at": time.monotonic()})
            error = ({"type": "error", "error": {"type": "authentication_error",
                                                  "message": "invalid x-api-key"}}
                     if anthropic else
                     {"error": {"message": "Incorrect API key provided", "type":
                                "invalid_request_error", "code": "invalid_api_key"}})
            self._send_json(401, error)
            return
        api = OPENAI_PATHS.get(path) or ANTHROPIC_PATHS.get(path)
        if api is None:
            provider._unrouted({"path": path, "query": query, "headers": headers, "body": body})
            self._send_json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
            return
        entry = provider._pay(path, query, body, headers, api, self.client_address)
        try:
            self._answer(entry)
        except (_ClientGone, OSError):
            self.close_connection = True
        finally:
            provider._end(entry)

    # ---- answers

    def _answer(self, entry):
        provider = self.server.provider
        fault = entry["fault"]
        if fault == "hang":
            self._hang()
            return
        if fault == "unanswered":
            self._close(rst=False)
        if fault == "status":
            self._pause(entry["delay"])
            self._send_error_status(entry)
            return
        if entry["stream"]:
            self._stream(entry, provider._events(entry))
        else:
            self._plain(entry, provider._plain_body(entry))
        if fault in ("close_after", "rst_after"):
            self._close(rst=fault == "rst_after")

    def _pause(self, seconds):
        if seconds > 0 and self.server.provider._stopping.wait(seconds):
            raise _ClientGone()  # stopping

    def _hang(self):
        """Never answers: waits until the client closes or the provider stops."""
        sock = self.connection
        provider = self.server.provider
        while not provider._stopping.wait(0.05):
            if self._client_gone(sock):
                break
        self.close_connection = True

    @staticmethod
    def _client_gone(sock):
        """Whether the client closed its end (a TLS one: its close_notify or
        its FIN, read; a plain one: its FIN, peeked)."""
        sock.setblocking(False)
        try:
            if isinstance(sock, ssl.SSLSocket):
                return sock.recv(1) == b""
            return sock.recv(1, socket.MSG_PEEK) == b""
        except (BlockingIOError, ssl.SSLWantReadError):
            return False
        except OSError:
            return True
        finally:
            sock.setblocking(True)

    def _send_error_status(self, entry):
        status = entry["fault_status"]
        kind = {429: "rate_limit_error"}.get(status, "api_error")
        if entry["api"] == "messages":
            body = {"type": "error", "error": {"type": kind, "message": f"fake {status}"}}
        else:
            body = {"error": {"message": f"fake {status}", "type": kind, "code": None}}
        data = json.dumps(body).encode()
        self.send_response(status)
        entry["status"] = status
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 429:
            self.send_header("Retry-After", "1")
        self.end_headers()
        self._write(entry, data)
        entry["completed"] = True

    def _write(self, entry, data, chunked=False):
        try:
            if chunked:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            else:
                self.wfile.write(data)
            self.wfile.flush()
        except OSError as e:
            raise _ClientGone() from e
        with self.server.provider._lock:
            entry["sent"] += data

    def _reset(self):
        """Closes the connection with an RST, at once (no FIN first, no
        terminal chunk)."""
        self._close(rst=True)
        raise _ClientGone()

    def _close(self, rst):
        """Closes the connection now, with a FIN or an RST: the socket's last
        reference, rfile's, goes too, so that the close is real."""
        if rst:
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
            except OSError:
                pass
        else:
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.close_connection = True
        self.rfile.close()
        self.connection.close()

    def _plain(self, entry, data):
        self._pause(entry["delay"])
        self.send_response(200)
        entry["status"] = 200
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if entry["fault"] == "reset":
            self._write(entry, data[:len(data) // 2])
            self._reset()
        self._write(entry, data)
        entry["completed"] = True

    def _stream(self, entry, events):
        self.send_response(200)
        entry["status"] = 200
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self.wfile.flush()
        except OSError as e:
            raise _ClientGone() from e
        gap = entry["delay"] / len(events)
        cut_after = len(events) // 2 if entry["fault"] == "reset" else None
        for i, event in enumerate(events):
            if i == cut_after:
                self._reset()
            self._pause(gap)
            self._write(entry, event, chunked=True)
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError as e:
            raise _ClientGone() from e
        entry["completed"] = True


class ModelProvider:
    """See the module's docstring. `api_key` is the key the provider accepts;
    `delay` the seconds each call takes unless a call says otherwise."""

    def __init__(self, api_key="sk-test-key", delay=0.0, unique_ids=False, model="fake-model",
                 ssl_context=None):
        self.api_key = api_key
        self.ssl_context = ssl_context
        self.delay = delay
        self.unique_ids = unique_ids
        self.model = model
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._ledger = []
        self._refused = []
        self._unrouted_list = []
        # (kind, status, when): ("status", code, None) | ("reset", None, "case-2") | ...
        self._faults = deque()
        self._seen = []
        self._sni_names = []
        self._tls_failures = []
        self._delay_rules = {}
        self._stopping = threading.Event()
        self._server = None
        self._thread = None
        self.url = None
        self.port = None

    # ---- lifecycle

    def start(self):
        if self.ssl_context is not None:
            self.ssl_context.sni_callback = self._sni
        self._server = _Server(self)
        self.port = self._server.server_address[1]
        scheme = "https" if self.ssl_context is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        with self._server.conn_lock:
            connections = list(self._server.open_connections)
        for sock in connections:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server.server_close()
        self._thread.join(timeout=5)
        self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- what tests read

    def ledger(self):
        """Copies of the paid calls, in arrival order."""
        with self._lock:
            return [dict(e, headers=dict(e["headers"])) for e in self._ledger]

    def refused(self):
        """Requests refused for their key (401), in arrival order."""
        with self._lock:
            return [dict(e) for e in self._refused]

    def seen(self):
        """Every request read, paid or not: {"method", "path" (with its query),
        "headers"} in arrival order."""
        with self._lock:
            return [dict(e, headers=dict(e["headers"])) for e in self._seen]

    def sni_names(self):
        """The server names TLS clients sent in SNI (None for none), in order."""
        with self._lock:
            return list(self._sni_names)

    def tls_failures(self):
        """Why each failed TLS handshake failed, as the server saw it."""
        with self._lock:
            return list(self._tls_failures)

    def unrouted(self):
        """Requests with the right key to a path the provider does not serve (404)."""
        with self._lock:
            return [dict(e) for e in self._unrouted_list]

    def paid(self, predicate=None):
        """How many paid calls match: all with no predicate; a string matches a
        call's prompt exactly; a callable gets each ledger entry."""
        if isinstance(predicate, str):
            prompt = predicate
            predicate = lambda e: e["prompt"] == prompt  # noqa: E731
        return sum(1 for e in self.ledger() if predicate is None or predicate(e))

    def in_flight(self):
        """Paid calls whose answer is still being written (or held back)."""
        return [e for e in self.ledger() if e["ended"] is None]

    def connections(self):
        """Connections accepted so far (keep-alive reuses one for many calls)."""
        return self._server.accepted if self._server else 0

    def wait_for_call(self, predicate, timeout):
        """Waits until a paid call matches (a prompt string or a callable on
        the entry); returns a copy of it. Woken by each arrival, no polling."""
        if isinstance(predicate, str):
            prompt = predicate
            predicate = lambda e: e["prompt"] == prompt  # noqa: E731
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for e in self._ledger:
                    if predicate(e):
                        return dict(e, headers=dict(e["headers"]))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no matching call reached the provider in {timeout}s; "
                                         f"prompts so far: {[e['prompt'] for e in self._ledger]}")
                self._changed.wait(left)

    # ---- what tests set

    def set_delay(self, seconds, when):
        """Calls whose prompt is `when` take `seconds` (see the docstring's order)."""
        with self._lock:
            self._delay_rules[when] = float(seconds)

    def clear_delays(self):
        with self._lock:
            self._delay_rules.clear()

    def fail_next(self, status=429, n=1, when=None):
        with self._lock:
            self._faults.extend([("status", int(status), when)] * n)

    def reset_mid_stream_next(self, n=1, when=None):
        with self._lock:
            self._faults.extend([("reset", None, when)] * n)

    def hang_next(self, n=1, when=None):
        with self._lock:
            self._faults.extend([("hang", None, when)] * n)

    def close_after_next(self, n=1, when=None, rst=False):
        with self._lock:
            self._faults.extend([("rst_after" if rst else "close_after", None, when)] * n)

    def close_unanswered_next(self, n=1, when=None):
        with self._lock:
            self._faults.extend([("unanswered", None, when)] * n)

    def clear_faults(self):
        with self._lock:
            self._faults.clear()

    # ---- the handler's side

    def _saw(self, method, path, headers):
        with self._lock:
            self._seen.append({"method": method, "path": path, "headers": dict(headers)})

    def _sni(self, sock, server_name, context):
        with self._lock:
            self._sni_names.append(server_name)

    def _tls_failed(self, why):
        with self._lock:
            self._tls_failures.append(why)

    def _take_fault(self, prompt):
        """The first queued fault for this prompt (or for any), removed."""
        for i, (kind, status, when) in enumerate(self._faults):
            if when is None or when == prompt:
                del self._faults[i]
                return kind, status
        return None, None

    def _refuse(self, record):
        with self._changed:
            self._refused.append(record)
            self._changed.notify_all()

    def _unrouted(self, record):
        with self._lock:
            self._unrouted_list.append(record)

    def _delay_for(self, body, headers, prompt):
        metadata = body.get("metadata") if isinstance(body, dict) else None
        if isinstance(metadata, dict) and isinstance(metadata.get("test_delay"), (int, float)):
            return float(metadata["test_delay"])
        if prompt in self._delay_rules:
            return self._delay_rules[prompt]
        try:
            return float(headers["x-test-delay"])
        except (KeyError, ValueError):
            return float(self.delay)

    def _pay(self, path, query, body, headers, api, peer=None):
        prompt = prompt_of(api, body)
        stream = isinstance(body, dict) and body.get("stream") is True
        with self._changed:
            fault, fault_status = self._take_fault(prompt)
            entry = {
                "serial": len(self._ledger) + 1, "path": path, "query": query, "body": body,
                "headers": headers, "prompt": prompt, "api": api, "stream": stream,
                "peer": f"{peer[0]}:{peer[1]}" if peer else None,
                "started": time.monotonic(), "ended": None, "completed": False,
                "status": None, "sent": b"", "fault": fault, "fault_status": fault_status,
                "usage": {"input_tokens": len(prompt.split()) + 10,
                          "output_tokens": OUTPUT_TOKENS},
                "answer": f"answer to {prompt}",
                "delay": self._delay_for(body, headers, prompt),
            }
            self._ledger.append(entry)
            self._changed.notify_all()
        return entry

    def _end(self, entry):
        with self._changed:
            entry["ended"] = time.monotonic()
            self._changed.notify_all()

    def _ids(self, entry):
        """(id suffix, model) of an answer: fixed by the request, or by the serial."""
        if self.unique_ids:
            suffix = f"{entry['serial']:06d}"
        else:
            raw = entry["body"] if isinstance(entry["body"], bytes) else json.dumps(
                entry["body"], sort_keys=True).encode()
            suffix = hashlib.sha256(raw).hexdigest()[:16]
        body = entry["body"]
        model = body.get("model") if isinstance(body, dict) and isinstance(body.get("model"), str) \
            else self.model
        return suffix, model

    @staticmethod
    def _words(text):
        """The deltas of a stream: the answer a word at a time, spaces kept."""
        words = text.split(" ")
        return [words[0]] + [" " + w for w in words[1:]]

    def _plain_body(self, entry):
        suffix, model = self._ids(entry)
        usage, text = entry["usage"], entry["answer"]
        if entry["api"] == "chat":
            body = {"id": f"chatcmpl-{suffix}", "object": "chat.completion",
                    "created": FIXED_CREATED, "model": model,
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": usage["input_tokens"],
                              "completion_tokens": usage["output_tokens"],
                              "total_tokens": usage["input_tokens"] + usage["output_tokens"]}}
        elif entry["api"] == "responses":
            body = self._response_object(suffix, model, entry, "completed")
        else:
            body = {"id": f"msg_{suffix}", "type": "message", "role": "assistant", "model": model,
                    "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": usage["input_tokens"],
                              "cache_creation_input_tokens": 0,
                              "cache_read_input_tokens": CACHE_READ_TOKENS,
                              "output_tokens": usage["output_tokens"]}}
        return json.dumps(body, separators=(",", ":")).encode()

    @staticmethod
    def _response_object(suffix, model, entry, status):
        done = status == "completed"
        usage = entry["usage"]
        return {
            "id": f"resp_{suffix}", "object": "response", "created_at": FIXED_CREATED,
            "status": status, "model": model,
            "output": [{"type": "message", "id": f"msg_{suffix}", "status": "completed",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": entry["answer"],
                                     "annotations": []}]}] if done else [],
            "usage": {"input_tokens": usage["input_tokens"],
                      "output_tokens": usage["output_tokens"],
                      "total_tokens": usage["input_tokens"] + usage["output_tokens"]}
            if done else None,
        }

    def _events(self, entry):
        suffix, model = self._ids(entry)
        usage, deltas = entry["usage"], self._words(entry["answer"])
        if entry["api"] == "chat":
            def chunk(delta, finish=None):
                return {"id": f"chatcmpl-{suffix}", "object": "chat.completion.chunk",
                        "created": FIXED_CREATED, "model": model,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            events = [sse(chunk({"role": "assistant", "content": ""}))]
            events += [sse(chunk({"content": d})) for d in deltas]
            events.append(sse(chunk({}, "stop")))
            options = entry["body"].get("stream_options") or {}
            if isinstance(options, dict) and options.get("include_usage"):
                events.append(sse({
                    "id": f"chatcmpl-{suffix}", "object": "chat.completion.chunk",
                    "created": FIXED_CREATED, "model": model, "choices": [],
                    "usage": {"prompt_tokens": usage["input_tokens"],
                              "completion_tokens": usage["output_tokens"],
                              "total_tokens": usage["input_tokens"] + usage["output_tokens"]}}))
            events.append(sse("[DONE]"))
            return events
        if entry["api"] == "responses":
            seq = iter(range(1000))
            events = [sse({"type": "response.created", "sequence_number": next(seq),
                           "response": self._response_object(suffix, model, entry, "in_progress")},
                          "response.created")]
            events += [sse({"type": "response.output_text.delta", "sequence_number": next(seq),
                            "item_id": f"msg_{suffix}", "output_index": 0, "content_index": 0,
                            "delta": d}, "response.output_text.delta") for d in deltas]
            events.append(sse({"type": "response.completed", "sequence_number": next(seq),
                               "response": self._response_object(suffix, model, entry,
                                                                 "completed")},
                              "response.completed"))
            return events
        start = {"type": "message_start", "message": {
            "id": f"msg_{suffix}", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": usage["input_tokens"], "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": CACHE_READ_TOKENS, "output_tokens": 1}}}
        events = [sse(start, "message_start"),
                  sse({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "text", "text": ""}}, "content_block_start")]
        events += [sse({"type": "content_block_delta", "index": 0,
                        "delta": {"type": "text_delta", "text": d}}, "content_block_delta")
                   for d in deltas]
        events += [sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
                   sse({"type": "message_delta",
                        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                        "usage": {"output_tokens": usage["output_tokens"]}}, "message_delta"),
                   sse({"type": "message_stop"}, "message_stop")]
        return events
