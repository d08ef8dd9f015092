#!/usr/bin/python3
"""Pushes per periodic checkpoint interval of one `inflight serve` with 50
running runs (issue 10: a fleet of pods must not make hundreds of pushes a
minute to one repo).

serve: `inflight serve --results-repo git://<proxy>/... --checkpoint-interval
2s` with N demo runs (tests=99999, test_ms=500), so that every run's files
change in every interval. A connection-counting proxy sits in front of `git
daemon`; each push is one connection. After two intervals of warm-up, the
connections and the "checkpoint pushed" log lines are counted over a window of
W intervals.

Baseline, same run: the checkpoints that landed per interval, which is what
one push per changed run made before (and what a CLI that pushes each run on
its own would make). Goal: 1 push per interval. No pass/fail assertion.
"""
import argparse
import sys
import time

import gitbench
from inflight_testing.waiting import wait_for
from serve_process import BenchServe

INTERVAL_S = 2


def checkpoints_pushed(serve):
    return sum(e.get("msg") == "checkpoint pushed" for e in serve.events())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--window", type=int, default=10, help="intervals counted")
    args = parser.parse_args()
    with gitbench.workspace("inflight-bench-pushes-", proxy_delay=0) as (_, daemon, proxy):
        daemon.new_repo("results.git")
        serve = BenchServe(["--results-repo", daemon.url("results.git", port=proxy.port),
                            "--checkpoint-interval", f"{INTERVAL_S}s", "--pod-name", "bench",
                            "--max-concurrent", str(args.runs)])
        try:
            serve.start_long_runs(args.runs, "p", test_ms=500)
            wait_for(lambda: checkpoints_pushed(serve) >= args.runs, 60, "every run's first checkpoint")
            time.sleep(2 * INTERVAL_S)  # warm-up: the first checkpoints' pushes are over
            _, _, conns0 = proxy.settled()
            pushed0 = checkpoints_pushed(serve)
            time.sleep(args.window * INTERVAL_S)  # the measured window itself, not a wait
            _, _, conns1 = proxy.settled()
            pushed1 = checkpoints_pushed(serve)
            pushes = (conns1 - conns0) / args.window
            landed = (pushed1 - pushed0) / args.window
            print(f"pushes_per_interval: {args.runs} running runs, --checkpoint-interval "
                  f"{INTERVAL_S}s, {args.window} intervals counted")
            print(f"  connections to the results repo per interval: {pushes:.2f} (goal 1)")
            print(f"  run checkpoints that landed per interval:     {landed:.2f} (baseline: one push "
                  f"each)")
            print(f"RATIO pushes/interval = {pushes:.2f}")
            print(f"RATIO pushes/checkpoints = {pushes / landed:.3f}" if landed else
                  "RATIO pushes/checkpoints = n/a (no checkpoint landed)")
            return 0
        finally:
            serve.stop()
            serve.cleanup()


if __name__ == "__main__":
    sys.exit(main())
