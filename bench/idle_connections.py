#!/usr/bin/python3
"""What idle HTTP connections cost `inflight serve`: memory and latency.

A client that opens connections and never sends a byte (a scanner, a stuck
load balancer, an attack) must not make serve run out of memory or stop
answering. For N idle connections (default 1,000 and 5,000; BENCH_IDLE_CONNS
or --connections), the bench reads serve's VmRSS before and after opening
them, and times /healthz on a fresh connection while they are held.

Baseline, measured the same way in the same run: /healthz latency with no
idle connection, and RSS before any. Prints the RSS per idle connection
(goal <= 8 KiB) and the latency ratio to the baseline. No pass/fail assertion
on the figures.
"""
import argparse
import http.client
import os
import resource
import socket
import statistics
import sys
import time

from inflight_testing.waiting import wait_for
from serve_process import BenchServe

GOAL_KIB_PER_CONNECTION = 8.0
SAMPLES = 200


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def healthz_ms(port):
    """Median and p99 of /healthz, each on a new connection, in ms."""
    times = []
    for _ in range(SAMPLES):
        start = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/healthz")
        if conn.getresponse().status != 200:
            raise RuntimeError("/healthz did not answer 200")
        conn.close()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1]


def open_idle(port, n):
    return [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def measure(n):
    serve = BenchServe(("--max-connections", str(n + 100)))
    try:
        serve.wait_ready(10)
        base_median, base_p99 = healthz_ms(serve.port)
        before = rss_kib(serve.proc.pid)
        fds = open_fds(serve.proc.pid)
        conns = open_idle(serve.port, n)
        wait_for(lambda: open_fds(serve.proc.pid) >= fds + n, 30, f"serve to accept {n}")
        after = rss_kib(serve.proc.pid)
        median, p99 = healthz_ms(serve.port)
        for c in conns:
            c.close()
        per_conn = (after - before) / n
        print(f"idle connections: {n}")
        print(f"  RSS before {before} KiB, with them {after} KiB: {per_conn:.2f} KiB each "
              f"(goal <= {GOAL_KIB_PER_CONNECTION} KiB)")
        print(f"  /healthz median {median:.3f} ms, p99 {p99:.3f} ms; "
              f"baseline (no idle connection) median {base_median:.3f} ms, p99 {base_p99:.3f} ms")
        print(f"RATIO idle_connections_{n}_healthz_median {median / base_median:.2f}")
        print(f"RATIO idle_connections_{n}_kib_per_connection_vs_goal "
              f"{per_conn / GOAL_KIB_PER_CONNECTION:.2f}")
        return serve.stop()
    finally:
        serve.cleanup()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("BENCH_IDLE_CONNS", "1000,5000")
    parser.add_argument("--connections", default=default, help="comma-separated counts")
    args = parser.parse_args()
    counts = [int(x) for x in args.connections.split(",")]
    limit = max(counts) + 1024
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))  # serve inherits it
    status = 0
    for n in counts:
        if measure(n) != 0:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
