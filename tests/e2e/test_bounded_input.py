"""Nothing from outside takes serve down: deep JSON, floods of connections and
submits, descriptor exhaustion, a full runs volume. Each test checks that serve
still answers and that what it holds is not lost."""
import itertools
import json
import os
import resource
import select
import signal
import socket
import subprocess
import time

from inflight_testing.git_servers import branches
from inflight_testing.http import http
from inflight_testing.waiting import wait_for
from conftest import INFLIGHT, script_child, small_tmpfs, write_config


def test_deeply_nested_bodies_are_refused_and_serve_goes_on(serve_factory):
    serve = serve_factory()
    serve.wait_ready()
    for body in ('{"tests":' + "[" * 100000, '{"tests":' + "[" * 70 + "]" * 70 + ', "x": 1}'):
        r = serve.post("/api/eval/run", body.encode())
        assert r.status == 400, r.body
        assert "nested deeper than 64" in r.json()["message"]
    assert serve.get("/healthz").status == 200
    assert serve.submit(tests=1, test_ms=1)


def test_a_request_whose_run_params_would_not_read_back_is_refused(serve_factory, tmp_path):
    """A body under the 1 MiB limit can render to a run-params.json over the
    1 MiB a restore reads (the request and the rendered argv both hold each
    id, pretty-printed): such a run would be saved and never restored. It is
    refused at submit, naming the size and the limit, and nothing is kept."""
    config = write_config(tmp_path / "ids.json", {
        "argv": ["/bin/true"], "optional": {"ids": ["--id", "{ids}"]},
        "params": {"ids": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}}}})
    serve = serve_factory("--config", config)
    serve.wait_ready()
    body = json.dumps({"id": "too-big", "ids": ["abcdefgh"] * 60_000}).encode()
    assert len(body) < 1 << 20
    r = serve.post("/api/eval/run", body)
    assert r.status == 413 and r.json()["error"] == "run_params_too_large", r.body
    assert "at most 524288" in r.json()["message"], r.body
    assert not (tmp_path / ".inflight" / "runs" / "too-big").exists()
    assert serve.post("/api/eval/run", {"id": "fits", "ids": ["abcdefgh"] * 1000}).status == 202


def test_a_full_queue_answers_503_queue_full_with_retry_after(serve_factory):
    serve = serve_factory("--max-concurrent", "1", "--max-queued", "2")
    serve.wait_ready()
    ids = [serve.submit(tests=100, test_ms=100) for _ in range(3)]  # 1 running, 2 queued
    r = serve.post("/api/eval/run", {"tests": 1})
    assert r.status == 503 and r.json()["error"] == "queue_full", r.body
    assert r.headers.get("Retry-After")
    serve.post(f"/api/eval/run/{ids[1]}/stop")
    assert serve.post("/api/eval/run", {"tests": 1}).status == 202


def test_connections_beyond_the_cap_get_503_and_the_probes_still_answer(serve_factory):
    serve = serve_factory("--max-connections", "20")
    serve.wait_ready()
    host, port = serve.url.removeprefix("http://").split(":")
    idle = [socket.create_connection((host, int(port))) for _ in range(20)]
    # Past the cap, the probe slots answer the probes, and only them.
    wait_for(lambda: serve.post("/api/eval/run", {"tests": 1}, timeout=2).status == 503, 10,
             "the cap to be reached")
    assert serve.get("/healthz", timeout=2).status == 200
    assert serve.get("/readyz", timeout=2).status == 200
    r = serve.get("/api/eval/runs", timeout=2)
    assert r.status == 503 and r.json()["error"] == "too_many_connections", r.body
    probes = [socket.create_connection((host, int(port))) for _ in range(8)]
    extra = socket.create_connection((host, int(port)))
    extra.settimeout(5)
    assert extra.recv(1024).startswith(b"HTTP/1.1 503")
    for s in idle + probes + [extra]:
        s.close()
    wait_for(lambda: serve.post("/api/eval/run", {"tests": 1}, timeout=2).status == 202, 10,
             "connections to free up")


def test_slow_clients_never_take_the_probes_or_the_api_away(serve_factory):
    """300 connections from 127.0.0.2 sending one header byte every 2 s and
    reconnecting when closed: each request must be read within 10 s, and one
    address holds at most --max-connections-per-client; probes and a submit
    from 127.0.0.1 answer all along."""
    serve = serve_factory()
    serve.wait_ready()
    host, port = serve.url.removeprefix("http://").split(":")

    def connect():
        s = socket.socket()
        s.bind(("127.0.0.2", 0))
        s.setblocking(False)
        s.connect_ex((host, int(port)))
        return s

    slow = [connect() for _ in range(300)]
    request = b"GET /api/eval/runs HTTP/1.1\r\nHost: x\r\n"
    sent = [0] * len(slow)
    answers = []
    deadline = time.monotonic() + 24
    while time.monotonic() < deadline:
        for i, s in enumerate(slow):
            try:
                s.send(request[sent[i] % len(request):][:1])
                sent[i] += 1
            except OSError:
                s.close()
                slow[i], sent[i] = connect(), 0
        answers.append((serve.get("/healthz", timeout=2).status,
                        serve.get("/readyz", timeout=2).status))
        time.sleep(2)
    assert all(a == (200, 200) for a in answers), answers
    assert serve.post("/api/eval/run", {"tests": 1}, timeout=5).status == 202
    for s in slow:
        s.close()


def test_a_request_sent_too_slowly_is_closed_at_its_read_deadline(serve_factory):
    """A request must arrive whole within 10 s however slowly it comes: one
    header byte a second does not keep the connection longer. serve closes it
    without an answer (no 408), and /healthz answers all along."""
    serve = serve_factory()
    serve.wait_ready()
    slow = socket.create_connection(("127.0.0.1", serve.port))
    opened = time.monotonic()
    slow.sendall(b"GET /api/eval/runs HTTP/1.1\r\n")
    header = itertools.cycle(b"X-Slow: 1\r\n")  # never the blank line that ends the headers
    answer, probes = None, []
    while answer is None and time.monotonic() - opened < 20:
        # The client's cadence: a byte a second, listening for the server between them.
        if select.select([slow], [], [], 1)[0]:
            try:
                answer = slow.recv(1024)
            except ConnectionResetError:
                answer = b""
            continue
        probes.append(serve.get("/healthz", timeout=2).status)
        slow.send(bytes([next(header)]))
    closed_after = time.monotonic() - opened
    slow.close()
    assert answer == b"", f"after {closed_after:.1f} s: {answer!r}"
    assert 9 <= closed_after <= 15, f"closed after {closed_after:.1f} s"
    assert len(probes) >= 8 and set(probes) == {200}, probes


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_ticks(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_out_of_descriptors_backs_off_and_recovers(tmp_path):
    """At EMFILE the accept loop waits on a timer instead of spinning."""
    limit = 64
    proc = subprocess.Popen(
        # One client address may hold every descriptor here: the per-client
        # cap would otherwise refuse the connections before they run out.
        [str(INFLIGHT), "serve", "--listen", "127.0.0.1:0", "--log-format", "json",
         "--max-connections-per-client", "1000"],
        cwd=tmp_path, stderr=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("INFLIGHT_")},
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)))
    try:
        # The lines before "listening" (the containment chosen) carry no address.
        address = next(e for e in map(json.loads, proc.stderr) if e["msg"] == "listening")["address"]
        url = "http://" + address
        wait_for(lambda: http("GET", url + "/readyz", timeout=2).status == 200, 30, "readyz")
        host, port = address.split(":")
        held = []
        for _ in range(limit + 20):
            try:
                held.append(socket.create_connection((host, int(port)), timeout=2))
            except OSError:
                break
        before = cpu_ticks(proc.pid)
        time.sleep(1.0)  # measuring CPU over a second, not waiting for an event
        assert cpu_ticks(proc.pid) - before < 30, "the accept loop spins"
        for s in held:
            s.close()
        wait_for(lambda: http("GET", url + "/healthz", timeout=2).status == 200, 10, "recovery")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        log = proc.stderr.read()
        assert log.count("cannot accept connections") == 1, log
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_full_runs_volume_keeps_serve_up_and_every_run_is_pushed(serve_factory, tmp_path,
                                                                   git_daemon):
    with small_tmpfs(tmp_path / "runs") as runs:
        config = write_config(tmp_path / "config.json", script_child("fills_disk.py"))
        serve = serve_factory("--config", config, "--runs-dir", str(runs), "--results-repo",
                              git_daemon.url, "--pod-name", "pod-a")
        serve.wait_ready()
        first = serve.submit()
        wait_for(lambda: (runs / first / "full").exists(), 30, "the volume to fill")
        later = [serve.post("/api/eval/run", {}) for _ in range(3)]
        assert all(r.status in (202, 500) for r in later), [r.body for r in later]
        assert serve.get("/healthz").status == 200
        accepted = [first] + [r.json()["id"] for r in later if r.status == 202]
        serve.signal(signal.SIGTERM)
        serve.wait_exit(timeout=60)
        pushed = branches(git_daemon.bare)
        for run_id in accepted:
            assert f"refs/heads/inflight/pod-a/{run_id}" in pushed, "".join(serve.lines)

