#!/usr/bin/python3
"""SIGTERM-to-exit of `inflight serve` holding N small runs, through a proxy
that adds 25 ms each way to a `git daemon` (a hosted git service's round trip).

serve: `inflight serve --results-repo git://<proxy>/... --checkpoint-interval 0`
with N demo runs (tests=99999, test_ms=1000) running and started; SIGTERM,
timed until serve has exited. Every run's shutdown checkpoint goes through the
proxy (and, before the end, the lease is given up).

Baseline, same run, same daemon and proxy: one `git push` of N branches, each
a commit of a small run dir of the same shape (run-params.json, console.log,
index.jsonl), timed from spawn to exit of `git push`. The commits are made
beforehand and not timed.

Repetitions alternate which goes first (default 3; --reps); medians are
reported, with the number of connections the proxy saw. Goal: serve/git <= 1.5
for N = 20 and N = 100 (issue 10). No pass/fail assertion.
"""
import argparse
import heapq
import os
import selectors
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gitbench  # noqa: E402
from serve_process import Serve  # noqa: E402

DELAY_S = 0.025
GOAL = 1.5


class DelayProxy:
    """127.0.0.1:<port> -> 127.0.0.1:<target_port>; every chunk is forwarded
    DELAY_S after it arrived, in order. One thread: a selector for reads and a
    heap of timed writes."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listener, selectors.EVENT_READ, None)
        self.due = []  # (time, seq, peer, data or None for EOF)
        self.seq = 0
        self.stopping = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        peers = {}
        while not self.stopping:
            timeout = max(0.0, self.due[0][0] - time.monotonic()) if self.due else 0.2
            for key, _ in self.sel.select(timeout):
                if key.data is None:
                    client, _ = self.listener.accept()
                    server = socket.create_connection(("127.0.0.1", self.target_port))
                    for s in (client, server):
                        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    peers[client], peers[server] = server, client
                    self.sel.register(client, selectors.EVENT_READ, "conn")
                    self.sel.register(server, selectors.EVENT_READ, "conn")
                    self.connections += 1
                    continue
                sock = key.fileobj
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    self.sel.unregister(sock)
                self.seq += 1
                heapq.heappush(self.due, (time.monotonic() + DELAY_S, self.seq, peers[sock],
                                          data or None))
            now = time.monotonic()
            while self.due and self.due[0][0] <= now:
                _, _, peer, data = heapq.heappop(self.due)
                try:
                    if data is None:
                        peer.shutdown(socket.SHUT_WR)
                    else:
                        peer.sendall(data)
                except OSError:
                    pass

    def close(self):
        self.stopping = True
        self.thread.join(timeout=5)
        self.listener.close()


def small_run_dir(path, run_id):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "run-params.json"), "w") as f:
        f.write(gitbench.run_params(run_id))
    with open(os.path.join(path, "console.log"), "w") as f:
        f.write("== attempt 1\n3 tests, 0 already done\n")
    with open(os.path.join(path, "index.jsonl"), "w") as f:
        for i in range(3):
            f.write(f'{{"test_id":"t{i:03d}","score":1}}\n')


def git_push_all(daemon, proxy, tmp, n, name):
    """Commits N run dirs on N branches (untimed), then times one push of all."""
    work = os.path.join(tmp, f"{name}-work")
    gitbench.git(None, "init", "-q", "-b", "main", work)
    refspecs = []
    for i in range(n):
        run_id = f"g-{i:03d}"
        shutil.rmtree(os.path.join(work, "run"), ignore_errors=True)
        small_run_dir(os.path.join(work, "run"), run_id)
        gitbench.git(work, "checkout", "-q", "--orphan", run_id)
        gitbench.git(work, "add", "-A")
        gitbench.git(work, "commit", "-q", "-m", f"inflight checkpoint {run_id} attempt 1 (shutdown)")
        refspecs.append(f"{run_id}:refs/heads/inflight/pod-g/{run_id}")
    _, _ = daemon.new_repo(f"{name}.git")
    before = proxy.connections
    t0 = time.monotonic()
    gitbench.git(work, "push", "-q", daemon.url(f"{name}.git", proxy.port), *refspecs)
    return time.monotonic() - t0, proxy.connections - before


def serve_shutdown(daemon, proxy, n, name):
    daemon.new_repo(f"{name}.git")
    serve = Serve(["--results-repo", daemon.url(f"{name}.git", proxy.port),
                   "--checkpoint-interval", "0", "--max-concurrent", str(n),
                   "--grace-period", "60s", "--pod-name", "bench"])
    try:
        serve.start_long_runs(n, name)
        before = proxy.connections
        t0 = time.monotonic()
        code = serve.stop(timeout=120)
        took = time.monotonic() - t0
        if code != 0:
            raise RuntimeError(f"serve exited {code}: " + "".join(serve.log[-20:]))
        refs = gitbench.git(os.path.join(daemon.base, f"{name}.git"), "for-each-ref",
                            "refs/heads/inflight/").splitlines()
        if len(refs) != n:
            raise RuntimeError(f"{len(refs)} branches pushed, not {n}")
        return took, proxy.connections - before
    finally:
        serve.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--runs", type=int, nargs="+", default=[20, 100])
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="inflight-bench-latency-")
    daemon = gitbench.GitDaemon(os.path.join(tmp, "srv"))
    proxy = DelayProxy(daemon.port)
    try:
        print(f"shutdown_push_latency: git daemon behind a proxy adding {DELAY_S * 1000:.0f} ms "
              f"each way, {args.reps} repetitions, medians")
        for n in args.runs:
            ours, theirs, conns = [], [], {}
            for rep in range(args.reps):
                steps = [("serve", serve_shutdown), ("git", git_push_all)]
                if rep % 2:
                    steps.reverse()
                for who, step in steps:
                    if who == "serve":
                        took, c = serve_shutdown(daemon, proxy, n, f"s{n}-{rep}")
                        ours.append(took)
                    else:
                        took, c = git_push_all(daemon, proxy, tmp, n, f"g{n}-{rep}")
                        theirs.append(took)
                    conns[who] = c
            a, b = statistics.median(ours), statistics.median(theirs)
            print(f"  {n:3d} runs: serve SIGTERM->exit {a * 1000:7.0f} ms ({conns['serve']} connections)"
                  f" | git push of {n} branches {b * 1000:6.0f} ms ({conns['git']} connection(s))"
                  f" | ratio {a / b:.2f} (goal <= {GOAL})")
    finally:
        proxy.close()
        daemon.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
