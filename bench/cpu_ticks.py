#!/usr/bin/python3
"""CPU used by `inflight serve` while it supervises 50 running children.

Starts `inflight serve --max-concurrent 50`, submits 50 demo runs
(tests=99999, test_ms=1000: each child would run for ~28 h), waits until the
API reports all 50 `running` and every child has written its start line to
console.log, then stops touching serve and reads utime+stime of serve from
/proc/PID/stat at t0 and after the window (default 60 s; env
BENCH_CPU_WINDOW or --window). Also reads the on-CPU nanoseconds from
/proc/PID/schedstat and the context switches (wake-ups) from
/proc/PID/status, which resolve far below one tick.

Baseline, same window: the same counters summed over the 50 children
(children of serve found by ppid in /proc/*/stat). Each child wakes once per
second to append a record, so it is the cost of the events themselves.
Goal: serve uses only what the children's events need (no polling): ~0 ticks.

Then SIGTERMs serve and waits for it to exit. No pass/fail assertion.
"""
import argparse
import os
import sys
import time

from inflight_testing.procfs import children_of, cpu
from serve_process import BenchServe

CLK_TCK = os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", type=float,
                    default=float(os.environ.get("BENCH_CPU_WINDOW", "60")))
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    n = args.runs

    # Periodic checkpoints are measured on their own (tick_nochange, periodic_bytes).
    serve = BenchServe(["--max-concurrent", str(n), "--checkpoint-interval", "0"])
    child_pids = []
    try:
        pid = serve.proc.pid
        serve.start_long_runs(n, "cpu")
        child_pids = children_of(pid)
        if len(child_pids) != n:
            raise RuntimeError(f"expected {n} children of serve, found {len(child_pids)}")

        # t0: no more requests to serve from here on
        s0 = cpu(pid)
        c0 = {c: cpu(c) for c in child_pids}
        t0 = time.monotonic()
        time.sleep(args.window)  # the measuring window itself
        s1 = cpu(pid)
        c1 = {c: cpu(c) for c in child_pids}
        elapsed = time.monotonic() - t0
        still = children_of(pid)
    finally:
        t_term = time.monotonic()
        code = serve.stop()
        t_exit = time.monotonic()
        serve.cleanup()

    d = lambda a, b, k: b[k] - a[k]
    serve_ticks, serve_ns, serve_sw = (d(s0, s1, k) for k in range(3))
    child_ticks = sum(d(c0[c], c1[c], 0) for c in child_pids)
    child_ns = sum(d(c0[c], c1[c], 1) for c in child_pids)
    child_sw = sum(d(c0[c], c1[c], 2) for c in child_pids)

    print(f"cpu_ticks: inflight serve supervising {n} running children, "
          f"window {elapsed:.1f} s, CLK_TCK={CLK_TCK}")
    print(f"  serve:            {serve_ticks} ticks ({serve_ticks / elapsed:.3f} ticks/s), "
          f"{serve_ns / 1e6:.3f} ms on CPU, {serve_sw} context switches "
          f"({serve_sw / elapsed:.2f}/s)")
    print(f"  {n} children (sum): {child_ticks} ticks ({child_ticks / elapsed:.3f} ticks/s), "
          f"{child_ns / 1e6:.3f} ms on CPU, {child_sw} context switches "
          f"({child_sw / elapsed:.2f}/s)")
    print(f"  children still alive at end of window: {len(still)}/{n}")
    print(f"  serve exit after SIGTERM: code {code} in {t_exit - t_term:.3f} s")
    print("  goal: serve ~0 ticks (only what the children's events need, no polling)")
    ratio_ticks = (f"{serve_ticks / child_ticks:.3f}" if child_ticks
                   else f"n/a (children used 0 ticks; serve {serve_ticks})")
    print(f"RATIO serve_ticks/children_ticks = {ratio_ticks}")
    print(f"RATIO serve_cpu_ns/children_cpu_ns = {serve_ns / child_ns:.4f}" if child_ns
          else "RATIO serve_cpu_ns/children_cpu_ns = n/a")
    return 0


if __name__ == "__main__":
    sys.exit(main())
