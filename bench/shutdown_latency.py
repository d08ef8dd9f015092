#!/usr/bin/python3
"""SIGTERM-to-exit latency of `inflight serve` with 20 children that exit promptly.

serve: start `inflight serve --max-concurrent 20`, submit 20 demo runs
(tests=99999, test_ms=1000), wait until the API reports all 20 `running` and
every child has written its start line ("N tests, M already done") to its
console.log, send SIGTERM and time until serve has exited (pidfd readable,
then waitpid).

Baseline, same run: 20 `inflight-demo-eval --output DIR --tests 99999
--test-ms 1000` launched directly (no supervisor); wait until each has written
its start line on stdout, SIGTERM all of them at once, time until the last one
has exited (pidfd readable, then waitpid). That is the slowest child's own
exit time, which serve cannot beat; serve's figure also includes its own exit.

Also timed, as a reference for reading the serve figure: N serial atomic
file writes with fsync (what serve does per ended attempt: docs/serve.md "Shutdown").

Repetitions alternate serve/baseline (default 5; env BENCH_REPS or --reps);
medians are reported. Goal: serve/baseline <= 1.2. No pass/fail assertion.
"""
import argparse
import os
import select
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from serve_process import BenchServe, bin_dir

GOAL = 1.2


def wait_exits(procs, timeout):
    """Blocks until every process has exited (pidfds, no polling) and reaps it.
    Returns the monotonic time at which the last one was reaped."""
    fds = {os.pidfd_open(p.pid): p for p in procs}
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    deadline = time.monotonic() + timeout
    last = None
    try:
        while fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{len(fds)} process(es) still alive after {timeout}s")
            for fd, _ in poller.poll(remaining * 1000):
                p = fds.pop(fd)
                poller.unregister(fd)
                os.close(fd)
                p.wait()  # already exited: waitpid returns at once
                last = time.monotonic()
    finally:
        for fd in fds:
            os.close(fd)
    return last


def measure_serve(n, timeout):
    serve = BenchServe(["--max-concurrent", str(n)])
    try:
        serve.start_long_runs(n, "sd")

        t0 = time.monotonic()
        serve.proc.send_signal(signal.SIGTERM)
        t1 = wait_exits([serve.proc], timeout)
        serve.reader.join(timeout=5)  # let the reader drain stderr up to EOF
        done = serve.logged("shutdown complete") or {}
        stopped = serve.logged("children stopped") or {}
        return t1 - t0, serve.proc.returncode, done.get("seconds"), stopped.get("seconds")
    finally:
        serve.cleanup()


def measure_baseline(n, timeout):
    tmp = tempfile.mkdtemp(prefix="inflight-bench-base-")
    demo = os.path.join(bin_dir(), "inflight-demo-eval")
    procs = []
    try:
        for i in range(n):
            procs.append(subprocess.Popen(
                [demo, "--output", os.path.join(tmp, f"b-{i:02d}"), "--tests", "99999",
                 "--test-ms", "1000"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
        # wait for each start line on stdout (event-driven, with a deadline)
        sel = selectors.DefaultSelector()
        bufs = {}
        for p in procs:
            os.set_blocking(p.stdout.fileno(), False)
            sel.register(p.stdout, selectors.EVENT_READ, p)
            bufs[p] = b""
        pending = set(procs)
        deadline = time.monotonic() + 30
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{len(pending)} demo children wrote no start line")
            for key, _ in sel.select(remaining):
                p = key.data
                chunk = os.read(p.stdout.fileno(), 4096)
                bufs[p] += chunk
                if b" tests, " in bufs[p] or not chunk:
                    if not chunk and b" tests, " not in bufs[p]:
                        raise RuntimeError(f"demo child {p.pid} exited before starting")
                    sel.unregister(p.stdout)
                    pending.discard(p)
        sel.close()

        t0 = time.monotonic()
        for p in procs:
            os.kill(p.pid, signal.SIGTERM)
        t1 = wait_exits(procs, timeout)
        codes = sorted({p.returncode for p in procs})
        return t1 - t0, codes
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
        shutil.rmtree(tmp, ignore_errors=True)


def measure_durable_writes(n):
    """Reference for interpreting serve's figure: n atomic run-params.json
    updates done serially the way serve writes them (write temp, fsync, rename,
    fsync dir), which serve does once per ended attempt."""
    tmp = tempfile.mkdtemp(prefix="inflight-bench-fsync-")
    try:
        dirs = []
        for i in range(n):
            dirs.append(os.path.join(tmp, f"r-{i:02d}"))
            os.mkdir(dirs[-1])
        data = b"x" * 1200  # about the size of a run-params.json
        t0 = time.monotonic()
        for d in dirs:
            part = os.path.join(d, ".run-params.json.tmp")
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
            os.write(fd, data)
            os.fsync(fd)
            os.close(fd)
            os.rename(part, os.path.join(d, "run-params.json"))
            dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(dfd)
            os.close(dfd)
        return time.monotonic() - t0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=int(os.environ.get("BENCH_REPS", "5")))
    ap.add_argument("--children", type=int, default=20)
    args = ap.parse_args()
    n = args.children

    serve_s, base_s, sync_s, stop_s = [], [], [], []
    print(f"shutdown_latency: SIGTERM -> exit, {n} children, {args.reps} repetitions")
    for rep in range(1, args.reps + 1):
        s, code, internal, stopped = measure_serve(n, timeout=60)
        stop_s.append(stopped)
        b, codes = measure_baseline(n, timeout=60)
        w = measure_durable_writes(n)
        serve_s.append(s)
        base_s.append(b)
        sync_s.append(w)
        internal_ms = f"{internal * 1000:.2f} ms" if internal is not None else "n/a"
        print(f"  rep {rep}: serve {s * 1000:8.2f} ms (exit {code}, its own 'shutdown complete' "
              f"says {internal_ms})   baseline {b * 1000:7.2f} ms (exit codes {codes})   "
              f"{n} serial fsync'd writes {w * 1000:7.2f} ms   "
              f"children stopped after {stopped * 1000:.2f} ms (serve's log)")
    ms, mb = statistics.median(serve_s), statistics.median(base_s)
    print(f"  median serve:    {ms * 1000:.2f} ms   (min {min(serve_s) * 1000:.2f}, "
          f"max {max(serve_s) * 1000:.2f})")
    print(f"  median baseline: {mb * 1000:.2f} ms   (min {min(base_s) * 1000:.2f}, "
          f"max {max(base_s) * 1000:.2f})")
    mw = statistics.median(sync_s)
    print(f"  median of {n} serial atomic fsync'd file writes (reference, not the baseline): "
          f"{mw * 1000:.2f} ms   (min {min(sync_s) * 1000:.2f}, max {max(sync_s) * 1000:.2f})")
    mstop = statistics.median(stop_s)
    print(f"  median SIGTERM -> every child reaped, from serve's log: {mstop * 1000:.2f} ms; "
          f"the rest of serve's time is the shutdown push of {n} checkpoints")
    print(f"  goal: serve/baseline <= {GOAL}")
    print(f"RATIO children-stopped/baseline (medians) = {mstop / mb:.2f}")
    print(f"RATIO serve-exit/baseline (medians, includes {n} checkpoint pushes) = {ms / mb:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
