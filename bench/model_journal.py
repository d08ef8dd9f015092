#!/usr/bin/python3
"""The model-call journal (SPEC §13, docs/models.md): what a call through
inflight costs against the same call made straight to the provider.

The bench starts a fake OpenAI-compatible provider of its own (this script
with --provider: asyncio, HTTP/1.1 keep-alive, POST /v1/chat/completions, a
JSON answer or an SSE stream of 21 events ending with `data: [DONE]`, each
event its own chunk and its own write; answers are a function of the prompt
only, so that a direct call and a call through inflight get the same bytes),
a `git daemon` results repo, and `inflight serve` whose config names the
provider as model `openai`. Each run's child (a few lines of Python written
by the bench) writes its OPENAI_BASE_URL and OPENAI_API_KEY
({model_url:openai}/v1 and {model_key}) to a file outside its run dir, then
waits for a signal: SIGUSR1 exits 75 (the template's retry_exit_codes: the
next attempt gets a new token and replays), SIGUSR2 exits 0 (the run
succeeds and is published). The calls are made by the bench, as the child
would, with the child's token, from a client process of their own (this
script with --client; serve's log is read in the bench's main process, and
its two lines per call are kept, not parsed). Every call has a body of its
own, so that each one through inflight is a new one, recorded; the same body
goes to the provider directly, and both answers must be the same bytes.

The sequential clients are raw sockets. A Linux client delays its ACKs (up
to 40 ms), as every HTTP client does; each sequential figure is also given
for a client that acknowledges every segment at once (`quickack`:
TCP_QUICKACK before each read, on a quarter as many calls), which shows what
serve adds apart from how its writes meet delayed ACKs.

Measured, each against its baseline in the same run:

1. Latency added per call, sequential, one kept-alive connection each way,
   from the request's first byte to the answer's last byte: --calls JSON
   calls and --calls streams (default 2,000 each), each made through
   inflight and directly in turn (the order alternates). p50 and p99 of both,
   and the difference. Goal: <= 1 ms added at p50.
2. Calls per second with --streams concurrent streams (default 200, one
   connection each, a call after another, --window seconds in all split in
   eight turns: direct, inflight, inflight, direct, and again, so that a
   passing slowdown of the machine falls on both sides), through inflight vs
   direct; CPU per call of serve, the provider, the client and the bench's
   own reader of serve's log beside it. Every call through inflight is
   recorded: serve's --model-max-journal-bytes is raised to 2 GiB, since the
   default 256 MiB fills within seconds and a call past it costs less. The
   journals of the items before are synced to disk first. Goal: >= 0.8 x
   direct.
3. Replayed calls: run `replay` records the same number of JSON calls and
   streams, its child exits 75, and the next attempt (new token, after the
   1 s backoff) asks the same questions, each answered from the journal.
   p50 and p99 against the same calls made directly; the first replayed call
   (the journal is read before it is answered) apart.
4. serve's VmRSS with the runs started and idle, then with --streams streams
   open and mid-answer (the provider wrote 10 of the 21 events of each and
   holds the rest until the bench releases them): per open stream beyond
   idle. Goal: <= 64 KiB per stream. Also: how many children had got an
   event of their stream by then.
5. A journal of --journal-mb MB (default 100: as many calls with a 1 MB JSON
   answer of random words, recorded through inflight, each also made
   directly): the time from the child's exit (SIGUSR2) to serve's
   "checkpoint branch deleted" (final checkpoint, result, index entry,
   branch deleted) against the same run without a journal (`small`, whose
   child made no call) in the same serve, and against the git CLI's init +
   add + commit + push of the same run dir (publish_latency's baseline);
   then what `inflight runs logs RUN_ID` downloads from the git daemon
   (bytes counted by a relay in front of it) for both runs, and how long it
   takes against a `git fetch` of the run's result through the same relay:
   it should download console.log, not the journal. At 200 MB, item 5 alone
   takes about 3 minutes on 2 cores.
6. One run's stream, an event every 5 ms (400 events), one after another
   for --stall-seconds, alone and then while another run's client uploads
   32 MiB request bodies one after another (each its own, so each is hashed
   and forwarded, from a process of its own, to a provider process of their
   own, model `bulk`, which answers them unparsed): the longest gap between
   two reads of the stream, through inflight and directly. Goal: no stall
   over 50 ms.

serve runs with --checkpoint-interval 0 (no periodic save: the final
checkpoint pushes the whole journal) and --model-max-calls-per-run and
--model-max-connections-per-run 1000 (and --model-max-journal-bytes 2 GiB,
--restore-max-bytes 4 GiB for item 2). Prints a table of the figures and
RATIO lines; no pass/fail assertion. While each sequential call through
inflight waits for a delayed ACK (~40 ms), 2,000 calls take minutes:
`--calls 300` keeps the whole bench under 3 minutes.

    INFLIGHT_BUILD_DIR=$PWD/build tests/support/python bench/model_journal.py \\
        [--calls 2000] [--streams 200] [--window 20] [--journal-mb 100] [--no-git-baseline]
"""
import argparse
import asyncio
import gc
import json
import os
import random
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

import gitbench
from checkpoint_push import push_git
from inflight_testing.git_servers import git
from inflight_testing.proxies import RelayProxy
from inflight_testing.serve import parse_log_line
from inflight_testing.waiting import wait_for
from serve_process import BenchServe, bin_dir

HOLD_AT = 10         # a held stream sends this many events, then waits for /release
BIG_REQUEST_PARSED = 1 << 20  # a larger request is the stall phase's upload
UPLOAD_ANSWER = (b'{"id":"chatcmpl-upload","object":"chat.completion","created":1700000000,'
                 b'"model":"fake-model","choices":[{"index":0,"finish_reason":"stop","message":'
                 b'{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":1,'
                 b'"completion_tokens":1,"total_tokens":2}}')
PACE_MS = 5          # the stall phase's stream: an event every 5 ms
PACED_EVENTS = 380   # ... 400 events in all, 2 s a stream
UPLOAD_BYTES = 32 << 20
GOAL_STALL_MS = 50.0
BIG_ANSWER = 1_000_000
KEY_ENV = "BENCH_PROVIDER_KEY"
GOAL_ADDED_MS = 1.0
GOAL_THROUGHPUT = 0.8
GOAL_KIB_PER_STREAM = 64.0
JOURNAL = Path(".inflight") / "model-calls"


# --------------------------------------------------------------------------
# HTTP/1.1 framing shared by the provider and the clients


class Body:
    """An HTTP/1.1 message body read incrementally from a bytearray: by
    Content-Length, chunked, or (neither, answers only) up to the close."""

    def __init__(self, headers, request=False):
        self.chunked = b"chunked" in headers.get(b"transfer-encoding", b"").lower()
        length = headers.get(b"content-length")
        self.left = int(length) if length is not None else (0 if request else None)
        self.to_close = not self.chunked and self.left is None
        self.parts = []
        self.state = "size"
        self.chunk_left = 0
        self.done = False

    def feed(self, buf):
        """Takes what belongs to the body off the front of `buf`; True once whole."""
        if self.to_close:
            self.parts.append(bytes(buf))
            del buf[:]
            return False
        if not self.chunked:
            take = min(self.left, len(buf))
            if take:
                self.parts.append(bytes(buf[:take]))
                del buf[:take]
                self.left -= take
            self.done = self.left == 0
            return self.done
        while True:
            if self.state == "data":
                take = min(self.chunk_left, len(buf))
                if take:
                    self.parts.append(bytes(buf[:take]))
                    del buf[:take]
                    self.chunk_left -= take
                if self.chunk_left:
                    return False
                self.state = "crlf"
            if self.state == "crlf":
                if len(buf) < 2:
                    return False
                del buf[:2]
                self.state = "size"
            end = buf.find(b"\r\n")
            if end < 0:
                return False
            line = bytes(buf[:end])
            del buf[:end + 2]
            if self.state == "trailer":
                if not line:
                    self.done = True
                    return True
                continue
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                self.state = "trailer"
            else:
                self.chunk_left, self.state = size, "data"

    def data(self):
        return b"".join(self.parts)

    def seen(self, needle):
        return sum(p.count(needle) for p in self.parts)


def parse_head(buf):
    """(first line's words, {lower-case name: value}) of a head at the front of
    buf, taken off it; None while incomplete."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = bytes(buf[:end]).split(b"\r\n")
    del buf[:end + 4]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    return lines[0].split(b" ", 2), headers


class Answer:
    """One HTTP answer read from a connection's bytearray."""

    def __init__(self):
        self.status = None
        self.body = None

    def feed(self, buf):
        if self.status is None:
            head = parse_head(buf)
            if head is None:
                return False
            self.status = int(head[0][1])
            self.body = Body(head[1])
        return self.body.feed(buf)


def request_bytes(prefix, auth, body):
    return (b"POST %s/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (prefix, auth, len(body), body))


def chat(prompt, stream, **extra):
    body = {"model": "fake-model", "messages": [
        {"role": "system", "content": "Answer the question."}, {"role": "user", "content": prompt}]}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return json.dumps(body | extra, separators=(",", ":")).encode()


# --------------------------------------------------------------------------
# the provider (--provider KEY): prints its port, serves until stdin closes


def vocabulary():
    rng = random.Random(42)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(2, 11))) for _ in range(3000)]


class Provider(asyncio.Protocol):
    held = []      # (transport, bytes still to send) of the streams held mid-answer
    vocab = None
    auth = b""

    def connection_made(self, transport):
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.head = None
        self.body = None

    def data_received(self, data):
        self.buf += data
        while True:
            if self.head is None:
                head = parse_head(self.buf)
                if head is None:
                    return
                self.head, self.body = head, Body(head[1], request=True)
            if not self.body.feed(self.buf):
                return
            (words, headers), body = self.head, self.body.data()
            self.head = self.body = None
            self.answer(words[0], words[1], headers, body)

    def send(self, status, content_type, data, extra=b""):
        self.transport.write(b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n%s"
                             % (status, content_type, len(data), extra, data))

    def answer(self, method, target, headers, body):
        if target == b"/held":
            self.send(200, b"application/json", b'{"held":%d}' % len(Provider.held))
            return
        if target == b"/release":
            held, Provider.held = Provider.held, []
            for transport, rest in held:
                if not transport.is_closing():
                    transport.write(rest)
            self.send(200, b"application/json", b'{"released":%d}' % len(held))
            return
        if method != b"POST" or target != b"/v1/chat/completions":
            self.send(404, b"application/json", b'{"error":{"message":"no route"}}')
            return
        if headers.get(b"authorization") != self.auth:
            self.send(401, b"application/json",
                      b'{"error":{"message":"Incorrect API key provided","code":"invalid_api_key"}}')
            return
        if len(body) > BIG_REQUEST_PARSED:  # the stall phase's upload: not parsed
            self.send(200, b"application/json", UPLOAD_ANSWER)
            return
        req = json.loads(body)
        prompt = req["messages"][-1]["content"]
        seed = zlib.crc32(prompt.encode())
        suffix = f"{seed:08x}"
        if not req.get("stream"):
            if "answer_bytes" in req:
                rng = random.Random(seed)
                n = int(req["answer_bytes"])
                text = " ".join(rng.choices(self.vocab, k=n // 6 + 64))[:n]
            else:
                text = "answer to " + prompt + "".join(f" w{(seed >> k) % 997}" for k in range(14))
            data = json.dumps({
                "id": f"chatcmpl-{suffix}", "object": "chat.completion", "created": 1700000000,
                "model": "fake-model", "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 17, "total_tokens": 29}},
                separators=(",", ":")).encode()
            self.send(200, b"application/json", data)
            return
        head = ('{"id":"chatcmpl-%s","object":"chat.completion.chunk","created":1700000000,'
                '"model":"fake-model","choices":' % suffix)
        deltas = ["answer", " to", " " + prompt] + [f" w{(seed >> k) % 997}" for k in range(14)]
        deltas += [f" p{k}" for k in range(int(req.get("paced_events", 0)))]
        # 21 events: the role, 17 deltas, the finish, the usage, [DONE]
        events = [head + '[{"index":0,"delta":{"role":"assistant","content":""},'
                  '"finish_reason":null}]}']
        events += [head + '[{"index":0,"delta":{"content":%s},"finish_reason":null}]}'
                   % json.dumps(d) for d in deltas]
        events.append(head + '[{"index":0,"delta":{},"finish_reason":"stop"}]}')
        events.append(head + '[],"usage":{"prompt_tokens":12,"completion_tokens":17,'
                      '"total_tokens":29}}')
        events.append("[DONE]")
        chunks = []
        for e in events:
            event = b"data: %s\n\n" % e.encode()
            chunks.append(b"%x\r\n%s\r\n" % (len(event), event))
        chunks.append(b"0\r\n\r\n")
        self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")
        if req.get("pace_ms"):  # an event every pace_ms, as a model writes them
            loop, pace = asyncio.get_running_loop(), req["pace_ms"] / 1000
            for i, c in enumerate(chunks):
                loop.call_later(i * pace, self.transport.write, c)
            return
        if req.get("hold"):
            for c in chunks[:HOLD_AT]:
                self.transport.write(c)
            Provider.held.append((self.transport, b"".join(chunks[HOLD_AT:])))
            return
        for c in chunks:  # one write per event, as a provider streams them
            self.transport.write(c)


def provider_main(key):
    Provider.vocab = vocabulary()
    Provider.auth = b"Bearer " + key.encode()
    gc.freeze()

    async def serve():
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Provider, "127.0.0.1", 0, backlog=1024)
        print(server.sockets[0].getsockname()[1], flush=True)
        closed = loop.create_future()
        loop.add_reader(sys.stdin.fileno(), lambda: closed.done() or closed.set_result(None))
        await closed
    asyncio.run(serve())


# --------------------------------------------------------------------------
# the client (--client SPEC): one phase, its figures as JSON on stdout


class SyncConn:
    """One kept-alive connection; call() times one request to its answer's last
    byte. With `quickack`, the client acknowledges every segment at once
    (TCP_QUICKACK before each read) instead of delaying its ACKs as Linux does."""

    def __init__(self, target, quickack=False):
        port, prefix, auth = target
        self.prefix, self.auth = prefix.encode(), auth.encode()
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.quickack = quickack
        self.buf = bytearray()

    def call(self, body):
        data = request_bytes(self.prefix, self.auth, body)
        answer = Answer()
        t0 = time.perf_counter_ns()
        self.sock.sendall(data)
        while not answer.feed(self.buf):
            if self.quickack:
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError(f"connection closed mid-answer (status {answer.status})")
            self.buf += chunk
        elapsed = time.perf_counter_ns() - t0
        return answer.status, answer.body.data(), elapsed


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))]


def summary(ns):
    ms = [v / 1e6 for v in ns]
    return {"p50": pct(ms, 0.5), "p99": pct(ms, 0.99), "mean": statistics.fmean(ms), "n": len(ms)}


def paired(direct, journal, bodies, first_apart=False):
    """Each body through inflight and directly in turn (the order alternates);
    both answers must be 200 and the same bytes."""
    times = {"direct": [], "journal": []}
    bad, first = [], None
    for i, body in enumerate(bodies):
        order = (("direct", direct), ("journal", journal))
        got = {}
        for name, conn in (order if i % 2 == 0 else order[::-1]):
            status, data, ns = conn.call(body)
            got[name] = (status, data)
            if name == "journal" and first_apart and first is None:
                first = ns / 1e6
                continue
            times[name].append(ns)
        if got["direct"][0] != 200 or got["journal"] != got["direct"]:
            bad.append(f"call {i}: direct {got['direct'][0]}, inflight {got['journal'][0]} "
                       f"{got['journal'][1][:200]!r}")
    out = {k: summary(v) for k, v in times.items()}
    out["mismatches"] = len(bad)
    out["first_mismatch"] = bad[:1]
    out["first_ms"] = first
    return out


def bodies_of(tag, n, stream, **extra):
    return [chat(f"{tag} {'s' if stream else 'j'} {i}", stream, **extra) for i in range(n)]


def quick_calls(calls):
    return max(50, calls // 4)


def phase_latency(spec):
    direct, journal = SyncConn(spec["direct"]), SyncConn(spec["journal"])
    quick = SyncConn(spec["journal"], quickack=True)
    for i in range(20):  # warm-up, not counted
        for stream in (False, True):
            body = chat(f"{spec['tag']} warm {i} {stream}", stream)
            direct.call(body)
            journal.call(body)
    out = {}
    for stream in (False, True):
        kind = "stream" if stream else "json"
        out[kind] = paired(direct, journal, bodies_of(spec["tag"], spec["calls"], stream))
        out[kind + "_quickack"] = paired(direct, quick, bodies_of(
            spec["tag"] + "q", quick_calls(spec["calls"]), stream))
    return out


def phase_record(spec):
    journal = SyncConn(spec["journal"], quickack=True)  # setting up: not timed
    t0 = time.perf_counter()
    n = 0
    for tag, calls in ((spec["tag"], spec["calls"]), (spec["tag"] + "q", quick_calls(spec["calls"]))):
        for stream in (False, True):
            for body in bodies_of(tag, calls, stream):
                status, _, _ = journal.call(body)
                if status != 200:
                    raise RuntimeError(f"recording: HTTP {status}")
                n += 1
    return {"recorded": n, "seconds": time.perf_counter() - t0}


def phase_replay(spec):
    direct, journal = SyncConn(spec["direct"]), SyncConn(spec["journal"])
    quick = SyncConn(spec["journal"], quickack=True)
    for i in range(20):
        direct.call(chat(f"{spec['tag']} warm {i}", False))
    out = {"json": paired(direct, journal, bodies_of(spec["tag"], spec["calls"], False), True)}
    out["stream"] = paired(direct, journal, bodies_of(spec["tag"], spec["calls"], True))
    for stream in (False, True):
        out[("stream" if stream else "json") + "_quickack"] = paired(direct, quick, bodies_of(
            spec["tag"] + "q", quick_calls(spec["calls"]), stream))
    return out


def phase_big(spec):
    """Half the big calls through inflight by a client that delays its ACKs,
    half by one that does not; each also made directly."""
    direct, journal = SyncConn(spec["direct"]), SyncConn(spec["journal"])
    quick = SyncConn(spec["journal"], quickack=True)
    bodies = [chat(f"{spec['tag']} big {i}", False, answer_bytes=spec["bytes"])
              for i in range(spec["calls"])]
    t0 = time.perf_counter()
    out = paired(direct, journal, bodies[0::2])
    out["quickack"] = paired(direct, quick, bodies[1::2])
    out["seconds"] = time.perf_counter() - t0
    return out


class AsyncConn(asyncio.Protocol):
    def __init__(self):
        self.buf = bytearray()
        self.answer = None
        self.waiter = None
        self.arrivals = None  # perf_counter() of each read, when a phase asks

    def connection_made(self, transport):
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data):
        self.buf += data
        if self.arrivals is not None:
            self.arrivals.append(time.perf_counter())
        if self.answer is not None and self.answer.feed(self.buf):
            answer, self.answer = self.answer, None
            self.waiter.set_result(answer)

    def connection_lost(self, exc):
        if self.waiter and not self.waiter.done():
            self.waiter.set_exception(RuntimeError(f"connection lost: {exc}"))

    def call(self, data):
        self.answer = Answer()
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self.waiter

    def events_so_far(self):
        answer = self.answer
        return answer.body.seen(b"data: ") if answer is not None and answer.body else 0


async def open_conns(target, n):
    loop = asyncio.get_running_loop()
    conns = []
    for _ in range(n):
        _, conn = await loop.create_connection(AsyncConn, "127.0.0.1", target[0])
        conns.append(conn)
    return conns


def proc_cpu_s(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def objects_bytes(bare):
    """Bytes of every object file and pack of a bare repo: what pushes stored."""
    return sum(f.stat().st_size for f in (Path(bare) / "objects").rglob("*") if f.is_file())


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def loop_calls(conn, target, cid, stop, counts, tag):
    """Calls one after another on one connection until `stop`; each is counted
    in the window that is open when it ends."""
    prefix, auth = target[1].encode(), target[2].encode()
    n = 0
    while not stop.is_set():
        body = chat(f"{tag} c{cid} n{n}", True)
        answer = await conn.call(request_bytes(prefix, auth, body))
        n += 1
        if answer.status == 200 and answer.body.data().endswith(b"data: [DONE]\n\n"):
            counts["ok"] += 1
        else:
            counts["bad"] += 1
            counts.setdefault("first_bad", f"HTTP {answer.status} {answer.body.data()[:200]!r}")


async def throughput(spec):
    pids = spec["pids"]
    conns = {name: await open_conns(spec[name], spec["streams"]) for name in ("direct", "journal")}
    turn = spec["window"] / 8
    result = {name: {"calls": 0, "bad": 0, "seconds": 0.0, "cpu": {k: 0.0 for k in pids},
                     "client_cpu": 0.0} for name in conns}
    for q, name in enumerate(("direct", "journal", "journal", "direct") * 2):
        stop = asyncio.Event()
        counts = {"ok": 0, "bad": 0}
        tasks = [asyncio.create_task(loop_calls(c, spec[name], i, stop, counts, f"tput q{q}"))
                 for i, c in enumerate(conns[name])]
        await asyncio.sleep(min(0.5, turn / 4))  # every stream under way
        ok0, bad0 = counts["ok"], counts["bad"]
        cpu0 = {k: proc_cpu_s(p) for k, p in pids.items()}
        own0, t0 = sum(os.times()[:2]), time.perf_counter()
        await asyncio.sleep(turn)
        ok1, bad1 = counts["ok"], counts["bad"]
        elapsed, own1 = time.perf_counter() - t0, sum(os.times()[:2])
        cpu1 = {k: proc_cpu_s(p) for k, p in pids.items()}
        stop.set()
        await asyncio.gather(*tasks)
        r = result[name]
        r["calls"] += ok1 - ok0
        r["bad"] += (bad1 - bad0)
        r["seconds"] += elapsed
        r.setdefault("turns", []).append(round((ok1 - ok0) / elapsed))
        r["client_cpu"] += own1 - own0
        for k in pids:
            r["cpu"][k] += cpu1[k] - cpu0[k]
        if "first_bad" in counts:
            r["first_bad"] = counts["first_bad"]
    for r in result.values():
        r["per_second"] = r["calls"] / r["seconds"]
    for cs in conns.values():
        for c in cs:
            c.transport.close()
    return result


async def paced_gaps(conn, target, tag, seconds):
    """Paced streams one after another for `seconds`: the longest gap
    between two reads of one stream, and how many reads there were."""
    prefix, auth = target[1].encode(), target[2].encode()
    longest, reads, n = 0.0, 0, 0
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        body = chat(f"{tag} paced {n}", True, pace_ms=PACE_MS, paced_events=PACED_EVENTS)
        conn.arrivals = []
        answer = await conn.call(request_bytes(prefix, auth, body))
        if answer.status != 200 or not answer.body.data().endswith(b"data: [DONE]\n\n"):
            raise RuntimeError(f"paced stream: HTTP {answer.status}")
        times, conn.arrivals = conn.arrivals, None
        longest = max([longest] + [b - a for a, b in zip(times, times[1:])])
        reads += len(times)
        n += 1
    return {"longest_gap_ms": longest * 1000, "reads": reads, "streams": n}


async def stall(spec):
    """One run's paced stream, alone and then while another run uploads
    32 MiB request bodies, one after another, each its own (so each is hashed
    and forwarded), from a process of its own (making and sending the bodies
    must not pause this one's reads), to a provider of their own: the longest
    gap between two events of the stream. The same made directly."""
    out = {}
    for name, stream, upload in (("direct", spec["stream_direct"], spec["upload_direct"]),
                                 ("inflight", spec["stream"], spec["upload"])):
        [conn] = await open_conns(stream, 1)
        alone = await paced_gaps(conn, stream, f"{name} alone", spec["seconds"])
        uploader = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--client",
             json.dumps({"phase": "upload", "upload": upload})],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if uploader.stdout.readline().strip() != "ready":
            raise RuntimeError("the uploader did not start")
        during = await paced_gaps(conn, stream, f"{name} during", spec["seconds"])
        uploader.stdin.close()
        uploads = json.loads(uploader.stdout.readline())
        uploader.wait(60)
        conn.transport.close()
        out[name] = {"alone": alone, "during": during, **uploads}
    return out


def phase_upload(spec):
    """32 MiB requests, each its own, one after another until stdin closes."""
    filler = os.urandom((UPLOAD_BYTES - 4096) // 2).hex().encode()  # under the 413 limit
    conn = SyncConn(spec["upload"])
    stop = threading.Event()  # set once stdin closes
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    print("ready", flush=True)
    seconds = []
    while not stop.is_set():
        body = (b'{"model":"fake-model","messages":[{"role":"user","content":"upload %d"}],'
                b'"filler":"%s"}' % (len(seconds), filler))
        t0 = time.perf_counter()
        status, _, _ = conn.call(body)
        if status != 200:
            raise RuntimeError(f"upload: HTTP {status}")
        seconds.append(time.perf_counter() - t0)
    return {"uploads": len(seconds),
            "upload_s_median": statistics.median(seconds) if seconds else None}


async def provider_get(port, path):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n" % path)
    await writer.drain()
    buf, answer = bytearray(), Answer()
    while not answer.feed(buf):
        buf += await reader.read(65536)
    writer.close()
    return json.loads(answer.body.data())


async def hold(spec):
    """Streams opened through inflight and held mid-answer: serve's RSS before,
    with the connections open, with every stream mid-answer (the provider has
    written HOLD_AT events of each), after."""
    pid, n, port = spec["serve_pid"], spec["streams"], spec["provider_port"]
    rss = {"idle": rss_kib(pid)}
    conns = await open_conns(spec["journal"], n)
    await asyncio.sleep(0.3)
    rss["connected"] = rss_kib(pid)
    prefix, auth = spec["journal"][1].encode(), spec["journal"][2].encode()
    waiters = [c.call(request_bytes(prefix, auth, chat(f"hold {i}", True, hold=True)))
               for i, c in enumerate(conns)]
    deadline = time.monotonic() + 60
    while (await provider_get(port, b"/held"))["held"] < n:
        if time.monotonic() > deadline:
            raise RuntimeError("the provider never held every stream")
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.5)  # serve has read what the provider wrote
    rss["mid_answer"] = rss_kib(pid)
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    seen = [c.events_so_far() for c in conns]
    released = await provider_get(port, b"/release")
    answers = await asyncio.wait_for(asyncio.gather(*waiters), 60)
    bad = [a.status for a in answers if a.status != 200 or
           not a.body.data().endswith(b"data: [DONE]\n\n")]
    rss["answered"] = rss_kib(pid)
    for c in conns:
        c.transport.close()
    await asyncio.sleep(0.5)
    rss["closed"] = rss_kib(pid)
    return {"rss": rss, "bad": len(bad), "fds_mid_answer": fds, "released": released["released"],
            "streams_with_events_mid_answer": sum(k > 0 for k in seen),
            "events_mid_answer_max": max(seen), "events_sent_mid_answer": HOLD_AT}


def client_main(spec):
    gc.disable()
    phase = spec["phase"]
    if phase in ("throughput", "hold", "stall"):
        out = asyncio.run({"throughput": throughput, "hold": hold, "stall": stall}[phase](spec))
    else:
        out = {"latency": phase_latency, "record": phase_record, "replay": phase_replay,
               "big": phase_big, "upload": phase_upload}[phase](spec)
    print(json.dumps(out))


PHASE_SECONDS = {}


def client(spec, timeout=600):
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--client", json.dumps(spec)],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"client {spec['phase']} failed ({proc.returncode}):\n{proc.stderr}")
    PHASE_SECONDS[spec["phase"]] = time.monotonic() - t0
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------
# the bench itself


class JournalServe(BenchServe):
    """Model-call lines are kept, not parsed, as they come (two per call):
    the reader thread must not take the bench's CPU."""

    def _parsed(self, line):
        return {"msg": "model call"} if '"model call ' in line else parse_log_line(line)

CHILD = r'''
import json, os, signal, sys
envdir, run_id, attempt = sys.argv[1:4]
signal.signal(signal.SIGUSR1, lambda *_: os._exit(75))
signal.signal(signal.SIGUSR2, lambda *_: os._exit(0))
path = os.path.join(envdir, f"{run_id}-{attempt}.json")
with open(path + ".tmp", "w") as f:
    json.dump({"pid": os.getpid(), "base_url": os.environ["OPENAI_BASE_URL"],
               "key": os.environ["OPENAI_API_KEY"]}, f)
os.rename(path + ".tmp", path)
print(f"run {run_id} attempt {attempt}: waiting", flush=True)
while True:
    signal.pause()
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000, help="sequential calls of each kind")
    ap.add_argument("--streams", type=int, default=200, help="concurrent streams")
    ap.add_argument("--window", type=float, default=20.0,
                    help="seconds of concurrent calls in all, half direct, half through inflight")
    ap.add_argument("--journal-mb", type=int, default=100, help="1 MB answers in the big run")
    ap.add_argument("--stall-seconds", type=float, default=6.0,
                    help="seconds of paced streams, alone and then beside the uploads")
    ap.add_argument("--no-git-baseline", action="store_true",
                    help="skip the git CLI push of the big run dir")
    args = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096:  # 2 x --streams connections each way; serve inherits it
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    key = "sk-bench-" + os.urandom(12).hex()
    os.environ[KEY_ENV] = key  # serve's api_key_env; serve blanks it for its children
    provider = bulk = serve = proxy = None
    with gitbench.workspace("inflight-bench-models-") as (tmp, daemon, _):
        try:
            provider = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--provider", key],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            provider_port = int(provider.stdout.readline())
            # Item 6's uploads go to a provider of their own (model `bulk`):
            # the one provider process would stall the stream itself.
            bulk = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--provider", key],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            bulk_port = int(bulk.stdout.readline())
            envdir = Path(tmp) / "envs"
            envdir.mkdir()
            child = Path(tmp) / "child.py"
            child.write_text(CHILD)
            config = Path(tmp) / "config.json"
            def waiter(model):
                return {"argv": [sys.executable, str(child), str(envdir), "{run_id}", "{attempt}"],
                        "resume_argv": [],
                        "env": {"OPENAI_BASE_URL": f"{{model_url:{model}}}/v1",
                                "OPENAI_API_KEY": "{model_key}"},
                        "retry_exit_codes": [75], "retry_backoff": "1s"}
            config.write_text(json.dumps({
                "models": {name: {"upstream": f"http://127.0.0.1:{port}", "api_key_env": KEY_ENV}
                           for name, port in (("openai", provider_port), ("bulk", bulk_port))},
                "children": {"waiter": waiter("openai"), "uploader": waiter("bulk")}}))
            daemon.new_repo("results.git")
            proxy = RelayProxy(daemon.port)
            t_spawn = time.monotonic()
            serve = JournalServe(["--config", str(config), "--pod-name", "pod-a",
                                  "--results-repo", daemon.url("results.git"),
                                  "--checkpoint-interval", "0", "--max-concurrent", "8",
                                  "--model-max-calls-per-run", "1000",
                                  "--model-max-connections-per-run", "1000",
                                  # every call of item 2 is recorded: its journal passes the
                                  # default 256 MiB within seconds
                                  "--model-max-journal-bytes", str(2 << 30),
                                  "--restore-max-bytes", str(4 << 30)])
            serve.wait_ready(30)
            listener = serve.wait_log(lambda e: e.get("msg") == "model listener", 10)
            model_port = int(listener["address"].rsplit(":", 1)[1])
            pid = serve.proc.pid
            rss_ready = rss_kib(pid)
            direct = [provider_port, "", key]

            def env_of(run_id, attempt, timeout=60):
                path = envdir / f"{run_id}-{attempt}.json"
                wait_for(path.exists, timeout, f"{path.name}", interval=0.01)
                info = json.loads(path.read_text())
                prefix = info["base_url"].split(f"127.0.0.1:{model_port}", 1)[1]
                if not prefix.endswith("/v1"):
                    raise RuntimeError(f"base url {info['base_url']}")
                return info, [model_port, prefix[:-3], info["key"]]

            runs = ["lat", "tput", "replay", "big", "small", "upload"]
            for r in runs:
                serve.submit(child="uploader" if r == "upload" else "waiter", id=f"bench-{r}")
            envs = {r: env_of(f"bench-{r}", 1) for r in runs}
            print("command: INFLIGHT_BUILD_DIR=" + os.path.dirname(bin_dir()) +
                  " tests/support/python bench/model_journal.py " + " ".join(sys.argv[1:]))
            print(f"model_journal: provider 127.0.0.1:{provider_port}, serve {bin_dir()}/inflight "
                  f"(model listener {listener['address']}), {len(runs)} runs started in "
                  f"{time.monotonic() - t_spawn:.1f} s; {args.calls} sequential calls of each "
                  f"kind, {args.streams} streams, {args.journal_mb} x 1 MB journal")

            # 4. memory of held streams (first: before the other phases grow serve's heap)
            held = client({"phase": "hold", "journal": envs["tput"][1], "streams": args.streams,
                           "serve_pid": pid, "provider_port": provider_port})
            rss = held["rss"]
            per_stream = (rss["mid_answer"] - rss["idle"]) / args.streams

            # 1. latency
            lat = client({"phase": "latency", "direct": direct, "journal": envs["lat"][1],
                          "calls": args.calls, "tag": "lat"})

            # 6. one run's stream while another run uploads 32 MiB bodies
            stalled = client({"phase": "stall", "stream": envs["lat"][1],
                              "upload": envs["upload"][1], "stream_direct": direct,
                              "upload_direct": [bulk_port, "", key],
                              "seconds": args.stall_seconds})

            # 3. replay: record, exit 75, the next attempt replays
            rec = client({"phase": "record", "journal": envs["replay"][1], "calls": args.calls,
                          "tag": "rep"})
            os.kill(envs["replay"][0]["pid"], signal.SIGUSR1)
            t_exit = time.monotonic()
            _, target2 = env_of("bench-replay", 2)
            attempt2_s = time.monotonic() - t_exit
            rep = client({"phase": "replay", "direct": direct, "journal": target2,
                          "calls": args.calls, "tag": "rep"})

            # 2. throughput; the journals written so far go to disk first, so that their
            # writeback (30 s after, by the kernel's default) lands in no turn
            os.sync()
            tput = client({"phase": "throughput", "direct": direct, "journal": envs["tput"][1],
                           "streams": args.streams, "window": args.window,
                           "pids": {"serve": pid, "provider": provider.pid, "bench": os.getpid()}})
            rss_after_tput = rss_kib(pid)

            # 5. the big journal
            big = client({"phase": "big", "direct": direct, "journal": envs["big"][1],
                          "calls": args.journal_mb, "bytes": BIG_ANSWER, "tag": "big"})
            big_dir = Path(serve.runs_dir) / "bench-big"
            journal_bytes = sum(p.stat().st_size for p in (big_dir / JOURNAL).glob("*"))

            def publish(run_id):
                info = envs[run_id][0]
                t0 = time.monotonic()
                os.kill(info["pid"], signal.SIGUSR2)
                serve.wait_log(lambda e: e.get("msg") == "checkpoint branch deleted" and
                               e.get("run_id") == f"bench-{run_id}", 600)
                return time.monotonic() - t0
            results = Path(daemon.base) / "results.git"
            t0 = time.monotonic()
            pub_small = publish("small")
            stored0 = objects_bytes(results)
            pub_big = publish("big")
            stored_big = objects_bytes(results) - stored0
            git_push_s = git_stored = None
            if not args.no_git_baseline:
                git_push_s, git_bare = push_git(daemon, tmp, str(big_dir), "git-big")
                git_stored = objects_bytes(git_bare)
            PHASE_SECONDS["publish"] = time.monotonic() - t0
            t0 = time.monotonic()

            def runs_logs(run_id):
                cwd = Path(tempfile.mkdtemp(dir=tmp, prefix="logs-"))
                proxy.settled(30)
                _, down0, _ = proxy.counts()
                t0 = time.monotonic()
                p = subprocess.run([os.path.join(bin_dir(), "inflight"), "runs", "logs", run_id,
                                    "--results-repo", daemon.url("results.git", proxy.port)],
                                   cwd=cwd, capture_output=True, timeout=300)
                elapsed = time.monotonic() - t0
                if p.returncode != 0:
                    raise RuntimeError(f"runs logs {run_id}: exit {p.returncode} {p.stderr!r}")
                _, down1, _ = proxy.settled(30)
                return down1 - down0, len(p.stdout), elapsed

            def git_fetch(run_id):
                bare = Path(tempfile.mkdtemp(dir=tmp, prefix="fetch-")) / "r.git"
                git(None, "init", "-q", "--bare", bare)
                proxy.settled(30)
                _, down0, _ = proxy.counts()
                t0 = time.monotonic()
                git(bare, "fetch", "-q", daemon.url("results.git", proxy.port),
                    f"refs/inflight-results/{run_id}:refs/fetched", timeout=300)
                elapsed = time.monotonic() - t0
                _, down1, _ = proxy.settled(30)
                return down1 - down0, elapsed
            logs_small = runs_logs("bench-small")
            logs_big = runs_logs("bench-big")
            fetch_big = git_fetch("bench-big")
            PHASE_SECONDS["runs logs"] = time.monotonic() - t0
            console_big = (big_dir / "console.log").stat().st_size
            published_journal = published_files = 0
            for line in git(results, "ls-tree", "-r", "-l",
                            "refs/inflight-results/bench-big").splitlines():
                meta, path = line.split("\t", 1)
                if path.startswith(str(JOURNAL) + "/"):
                    published_journal += int(meta.split()[3])
                    published_files += 1

            # what serve logged of the calls, and any warning
            ended = {}
            problems = []
            for line in serve.lines:
                if '"model call ended"' in line:
                    e = json.loads(line)
                    k = (e.get("run_id"), e.get("source"), e.get("outcome"), e.get("status"))
                    ended[k] = ended.get(k, 0) + 1
                elif '"level":"warn' in line or '"level":"error' in line:
                    problems.append(line.rstrip())
            status_replay = serve.status("bench-replay").get("model")
        finally:
            if serve:
                serve.cleanup()
            for process in (provider, bulk):
                if process:
                    process.stdin.close()
                    process.wait(10)
            if proxy:
                proxy.close()

    # ---- report
    print()
    print("1. latency per call, sequential (ms; request's first byte to answer's last byte)")
    for kind in ("json", "stream", "json_quickack", "stream_quickack"):
        d, j = lat[kind]["direct"], lat[kind]["journal"]
        print(f"  {kind:15} direct p50 {d['p50']:.3f} p99 {d['p99']:.3f} | inflight p50 "
              f"{j['p50']:.3f} p99 {j['p99']:.3f} | added p50 {j['p50'] - d['p50']:.3f} "
              f"p99 {j['p99'] - d['p99']:.3f} ({d['n']} calls, {lat[kind]['mismatches']} "
              f"answers differing) {lat[kind]['first_mismatch']}")
    print("  (_quickack: the client acknowledges at once, TCP_QUICKACK; the others delay their "
          "ACKs as Linux clients do)")
    print("2. concurrent streams")
    for name in ("direct", "journal"):
        r = tput[name]
        per = {k: 1e6 * v / max(1, r["calls"]) for k, v in r["cpu"].items()}
        print(f"  {name:7} {r['per_second']:.0f} calls/s ({r['calls']} in {r['seconds']:.1f} s, "
              f"{r['bad']} bad {r.get('first_bad', '')}); CPU per call: serve {per['serve']:.0f} us, "
              f"provider {per['provider']:.0f} us, client "
              f"{1e6 * r['client_cpu'] / max(1, r['calls']):.0f} us, the bench's process "
              f"(serve's log reader) {per['bench']:.0f} us; calls/s of each turn {r['turns']}")
    print("3. replay (ms)")
    print(f"  recorded {rec['recorded']} calls in {rec['seconds']:.1f} s; exit 75 -> attempt 2's "
          f"child running {attempt2_s:.2f} s later (backoff 1 s); first replayed call "
          f"{rep['json']['first_ms']:.3f} ms")
    for kind in ("json", "stream", "json_quickack", "stream_quickack"):
        d, j = rep[kind]["direct"], rep[kind]["journal"]
        print(f"  {kind:15} direct p50 {d['p50']:.3f} p99 {d['p99']:.3f} | replayed p50 "
              f"{j['p50']:.3f} p99 {j['p99']:.3f} ({rep[kind]['mismatches']} answers differing) "
              f"{rep[kind]['first_mismatch']}")
    print(f"  run status model: {status_replay}")
    print("4. serve's VmRSS (KiB)")
    print(f"  at ready {rss_ready}; idle with {len(runs)} runs {rss['idle']}; {args.streams} "
          f"connections {rss['connected']}; mid-answer {rss['mid_answer']} "
          f"({held['fds_mid_answer']} fds); answered {rss['answered']}; closed {rss['closed']}; "
          f"after item 2 {rss_after_tput}; bad answers {held['bad']}")
    print(f"  per open stream: {per_stream:.1f} KiB (goal <= {GOAL_KIB_PER_STREAM})")
    print(f"  streams whose child had got an event while the provider held them after "
          f"{held['events_sent_mid_answer']} events: {held['streams_with_events_mid_answer']} "
          f"of {args.streams} (most events got: {held['events_mid_answer_max']})")
    print("5. journal of the big run")
    bq = big["quickack"]
    print(f"  {args.journal_mb} x 1 MB answers, recorded in {big['seconds']:.1f} s: direct p50 "
          f"{big['direct']['p50']:.1f} ms, inflight p50 {big['journal']['p50']:.1f} ms; with "
          f"quickack: direct {bq['direct']['p50']:.1f} ms, inflight {bq['journal']['p50']:.1f} ms "
          f"({big['mismatches'] + bq['mismatches']} differing); "
          f"journal {journal_bytes / 1e6:.1f} MB; published: {published_journal / 1e6:.1f} MB "
          f"of it in {published_files} blobs")
    print(f"  child exit -> branch deleted: with the journal {pub_big:.2f} s, without {pub_small:.2f} s"
          + (f"; git CLI init+add+commit+push of the run dir {git_push_s:.2f} s"
             if git_push_s else ""))
    print(f"  the big run's publish stored {stored_big / 1e6:.1f} MB in the results repo"
          + (f"; the git CLI's push of the run dir {git_stored / 1e6:.1f} MB" if git_stored else ""))
    for name, (down, out, secs) in (("small", logs_small), ("big", logs_big)):
        print(f"  runs logs bench-{name}: {down / 1e6:.2f} MB received from the git daemon, "
              f"{out} bytes printed, {secs:.2f} s")
    print(f"  git fetch of bench-big's result: {fetch_big[0] / 1e6:.2f} MB, {fetch_big[1]:.2f} s")
    print(f"  console.log of bench-big: {console_big} bytes")
    print("6. one run's stream (an event every %d ms) while another run uploads %d MiB bodies"
          % (PACE_MS, UPLOAD_BYTES >> 20))
    for name in ("direct", "inflight"):
        r = stalled[name]
        a, d = r["alone"], r["during"]
        print(f"  {name:8} longest gap between two reads of the stream: alone "
              f"{a['longest_gap_ms']:.1f} ms ({a['streams']} streams, {a['reads']} reads); during "
              f"{r['uploads']} uploads (median {r['upload_s_median'] or 0:.2f} s each) "
              f"{d['longest_gap_ms']:.1f} ms ({d['streams']} streams)")
    print("phases (s): " + ", ".join(f"{k} {v:.0f}" for k, v in PHASE_SECONDS.items()))
    print("serve's log: model call ended by (run, source, outcome, status):")
    for k, v in sorted(ended.items(), key=str):
        print(f"  {k}: {v}")
    for line in problems[:20]:
        print(f"  warn/error: {line}")
    print()
    rows = []  # (figure, through inflight, baseline, ratio, goal)

    def met(ok):
        return "met" if ok else "NOT MET"
    for kind in ("json", "stream", "json_quickack", "stream_quickack"):
        d, j = lat[kind]["direct"], lat[kind]["journal"]
        for p in ("p50", "p99"):
            added = j[p] - d[p]
            goal = f"<= {GOAL_ADDED_MS} ms added: {met(added <= GOAL_ADDED_MS)}" if p == "p50" else ""
            rows.append((f"1. {kind} call {p} ({d['n']} sequential)", f"{j[p]:.3f} ms",
                         f"direct {d[p]:.3f} ms", f"{j[p] / d[p]:.2f} (+{added:.3f} ms)", goal))
    d, j = tput["direct"], tput["journal"]
    ratio = j["per_second"] / d["per_second"]
    rows.append((f"2. calls/s, {args.streams} streams", f"{j['per_second']:.0f}/s",
                 f"direct {d['per_second']:.0f}/s", f"{ratio:.2f}",
                 f">= {GOAL_THROUGHPUT}: {met(ratio >= GOAL_THROUGHPUT)}"))
    rows.append(("2. serve's CPU per call", f"{1e6 * j['cpu']['serve'] / j['calls']:.0f} us",
                 f"provider {1e6 * d['cpu']['provider'] / d['calls']:.0f} us + client "
                 f"{1e6 * d['client_cpu'] / d['calls']:.0f} us", "", ""))
    for kind in ("json", "stream", "json_quickack", "stream_quickack"):
        d, j = rep[kind]["direct"], rep[kind]["journal"]
        for p in ("p50", "p99"):
            rows.append((f"3. replayed {kind} call {p}", f"{j[p]:.3f} ms", f"direct {d[p]:.3f} ms",
                         f"{j[p] / d[p]:.2f}", ""))
    rows.append(("4. serve's RSS per open stream", f"{per_stream:.1f} KiB",
                 f"idle {rss['idle']} KiB", f"{per_stream / GOAL_KIB_PER_STREAM:.2f} of the goal",
                 f"<= {GOAL_KIB_PER_STREAM:.0f} KiB: {met(per_stream <= GOAL_KIB_PER_STREAM)}"))
    rows.append(("5. 1 MB answer p50", f"{big['journal']['p50']:.1f} ms",
                 f"direct {big['direct']['p50']:.1f} ms",
                 f"{big['journal']['p50'] / big['direct']['p50']:.2f}", ""))
    rows.append((f"5. child exit -> published, {journal_bytes / 1e6:.0f} MB journal",
                 f"{pub_big:.2f} s", f"no journal {pub_small:.2f} s", f"{pub_big / pub_small:.1f}", ""))
    if git_push_s:
        rows.append(("5. the same, against the git CLI", f"{pub_big:.2f} s",
                     f"git init+add+commit+push {git_push_s:.2f} s", f"{pub_big / git_push_s:.2f}", ""))
    if git_stored:
        rows.append(("5. bytes the publish stored in the repo", f"{stored_big / 1e6:.1f} MB",
                     f"git CLI push {git_stored / 1e6:.1f} MB", f"{stored_big / git_stored:.2f}", ""))
    rows.append(("5. runs logs: bytes received", f"{logs_big[0] / 1e6:.2f} MB",
                 f"no journal {logs_small[0] / 1e3:.1f} kB", f"{logs_big[0] / journal_bytes:.2f} "
                 f"of the journal", f"console.log only ({console_big} B): {met(logs_big[0] < 1e6)}"))
    rows.append(("5. runs logs: time", f"{logs_big[2]:.2f} s",
                 f"git fetch of the result {fetch_big[1]:.2f} s", f"{logs_big[2] / fetch_big[1]:.2f}",
                 ""))
    si, sd = stalled["inflight"]["during"], stalled["direct"]["during"]
    rows.append((f"6. longest gap of a stream, {UPLOAD_BYTES >> 20} MiB uploads beside it",
                 f"{si['longest_gap_ms']:.1f} ms", f"direct {sd['longest_gap_ms']:.1f} ms",
                 f"{si['longest_gap_ms'] / sd['longest_gap_ms']:.2f}",
                 f"<= {GOAL_STALL_MS:.0f} ms: {met(si['longest_gap_ms'] <= GOAL_STALL_MS)}"))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in [("figure", "through inflight", "baseline (same run)", "ratio", "goal")] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    print()
    for kind in ("json", "stream", "json_quickack", "stream_quickack"):
        d, j = lat[kind]["direct"], lat[kind]["journal"]
        added = j["p50"] - d["p50"]
        print(f"RATIO model_latency_{kind}_p50 inflight/direct = {j['p50'] / d['p50']:.2f}; "
              f"added {added:.3f} ms (goal <= {GOAL_ADDED_MS} ms) {met(added <= GOAL_ADDED_MS)}")
    print(f"RATIO model_streams_{args.streams}_calls_per_s inflight/direct = {ratio:.2f} "
          f"(goal >= {GOAL_THROUGHPUT}) {met(ratio >= GOAL_THROUGHPUT)}")
    for kind in ("json", "stream"):
        d, j = rep[kind]["direct"], rep[kind]["journal"]
        print(f"RATIO model_replay_{kind} replayed/direct = p50 {j['p50'] / d['p50']:.2f}, "
              f"p99 {j['p99'] / d['p99']:.2f}")
    print(f"RATIO model_rss_kib_per_stream_vs_goal = {per_stream / GOAL_KIB_PER_STREAM:.2f} "
          f"({per_stream:.1f} KiB) {met(per_stream <= GOAL_KIB_PER_STREAM)}")
    print(f"RATIO model_publish_{args.journal_mb}mb_journal with/without = {pub_big / pub_small:.1f}"
          + (f"; vs git CLI {pub_big / git_push_s:.2f}" if git_push_s else ""))
    print(f"RATIO model_runs_logs_bytes with/without journal = "
          f"{logs_big[0] / max(1, logs_small[0]):.0f} ({logs_big[0] / journal_bytes:.2f} of the journal)")
    stall_ms = stalled["inflight"]["during"]["longest_gap_ms"]
    direct_ms = stalled["direct"]["during"]["longest_gap_ms"]
    print(f"RATIO model_stream_gap_during_uploads inflight/direct = {stall_ms / direct_ms:.2f}; "
          f"longest {stall_ms:.1f} ms against {direct_ms:.1f} ms "
          f"(goal <= {GOAL_STALL_MS:.0f} ms) {met(stall_ms <= GOAL_STALL_MS)}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--provider":
        provider_main(sys.argv[2])
    elif len(sys.argv) > 2 and sys.argv[1] == "--client":
        client_main(json.loads(sys.argv[2]))
    else:
        main()
