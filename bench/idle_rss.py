#!/usr/bin/python3
"""Idle resident memory of `inflight serve`.

Starts `inflight serve`, waits until /readyz answers 200, reads VmRSS (and
VmHWM) from /proc/PID/status, then again after IDLE_SECONDS idle seconds
(default 3; env BENCH_IDLE_SECONDS or --idle-seconds). During the idle window
it also counts the CPU ticks and context switches serve uses (there is no
traffic, so anything but 0 means serve wakes up by itself).

Baseline, measured the same way in the same run: a trivial process
(`/usr/bin/sleep`). Reference: agentv serve idles at 88-107 MB; goal <= 8 MB.

Prints RSS in MB, the ratio to the 8 MB goal and the ratio to the baseline.
No pass/fail assertion on the figures.
"""
import argparse
import os
import subprocess
import sys
import time

from inflight_testing.procfs import cpu, stat_fields, status_fields
from inflight_testing.waiting import wait_for
from serve_process import BenchServe

GOAL_MB = 8.0
AGENTV_IDLE_MB = (88, 107)


def kb(value):  # "5420 kB" -> 5420
    return int(value.split()[0])


def measure_baseline(idle):
    proc = subprocess.Popen(["/usr/bin/sleep", str(int(idle) + 10)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        # measured once it has exec'd and blocks in its nanosleep (state S),
        # i.e. after the dynamic loader and libc start-up are done
        wait_for(lambda: os.readlink(f"/proc/{proc.pid}/exe").endswith("/sleep")
                 and stat_fields(proc.pid)[0] == "S", 5, "sleep to block in nanosleep")
        first = kb(status_fields(proc.pid)["VmRSS"])
        time.sleep(idle)
        later = kb(status_fields(proc.pid)["VmRSS"])
    finally:
        proc.kill()
        proc.wait()
    return first, later


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle-seconds", type=float,
                    default=float(os.environ.get("BENCH_IDLE_SECONDS", "3")))
    args = ap.parse_args()

    serve = BenchServe()
    try:
        pid = serve.proc.pid
        serve.wait_ready(10)
        st = status_fields(pid)
        rss_ready, hwm_ready = kb(st["VmRSS"]), kb(st["VmHWM"])
        threads = int(st["Threads"])
        c0 = cpu(pid)
        time.sleep(args.idle_seconds)  # the idle window is the measurement
        c1 = cpu(pid)
        st = status_fields(pid)
        rss_idle, hwm_idle = kb(st["VmRSS"]), kb(st["VmHWM"])
    finally:
        code = serve.stop()
        serve.cleanup()

    base_first, base_idle = measure_baseline(args.idle_seconds)

    mb = lambda k: k / 1024.0
    print("idle_rss: inflight serve resident memory")
    print(f"  {'serve at ready:':<27}VmRSS {mb(rss_ready):6.2f} MB  (VmHWM {mb(hwm_ready):.2f} MB, "
          f"{threads} threads)")
    print(f"  {f'serve after {args.idle_seconds:g}s idle:':<27}VmRSS {mb(rss_idle):6.2f} MB  "
          f"(VmHWM {mb(hwm_idle):.2f} MB)")
    print(f"  {'serve CPU while idle:':<27}{c1[0] - c0[0]} ticks, {(c1[1] - c0[1]) / 1e6:.3f} ms on CPU, "
          f"{c1[2] - c0[2]} context switches")
    print(f"  {'baseline /usr/bin/sleep:':<27}VmRSS {mb(base_first):6.2f} MB, after {args.idle_seconds:g}s "
          f"{mb(base_idle):.2f} MB")
    print(f"  reference: agentv serve idles at {AGENTV_IDLE_MB[0]}-{AGENTV_IDLE_MB[1]} MB; "
          f"goal <= {GOAL_MB:g} MB")
    print(f"  serve exit code after SIGTERM: {code}")
    print(f"RATIO serve_idle_rss/goal = {mb(rss_idle) / GOAL_MB:.3f}")
    print(f"RATIO serve_idle_rss/sleep_rss = {rss_idle / base_idle:.2f}")
    print(f"RATIO serve_idle_rss/agentv_idle_rss = {mb(rss_idle) / AGENTV_IDLE_MB[1]:.3f}"
          f"-{mb(rss_idle) / AGENTV_IDLE_MB[0]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
