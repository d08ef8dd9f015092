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
import os
import shutil
import statistics
import time

import gitbench
from inflight_testing.git_servers import git
from serve_process import BenchServe

DELAY_S = 0.025
GOAL = 1.5


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
    git(None, "init", "-q", "-b", "main", work)
    refspecs = []
    for i in range(n):
        run_id = f"g-{i:03d}"
        shutil.rmtree(os.path.join(work, "run"), ignore_errors=True)
        small_run_dir(os.path.join(work, "run"), run_id)
        git(work, "checkout", "-q", "--orphan", run_id)
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", f"inflight checkpoint {run_id} attempt 1 (shutdown)")
        refspecs.append(f"{run_id}:refs/heads/inflight/pod-g/{run_id}")
    _, _ = daemon.new_repo(f"{name}.git")
    before = proxy.connections
    t0 = time.monotonic()
    git(work, "push", "-q", daemon.url(f"{name}.git", proxy.port), *refspecs)
    return time.monotonic() - t0, proxy.connections - before


def serve_shutdown(daemon, proxy, n, name):
    daemon.new_repo(f"{name}.git")
    serve = BenchServe(["--results-repo", daemon.url(f"{name}.git", proxy.port),
                        "--checkpoint-interval", "0", "--max-concurrent", str(n),
                        "--grace-period", "60s", "--pod-name", "bench"])
    try:
        serve.start_long_runs(n, name)
        before = proxy.connections
        t0 = time.monotonic()
        code = serve.stop(timeout=120)
        took = time.monotonic() - t0
        if code != 0:
            raise RuntimeError(f"serve exited {code}: " + "".join(serve.lines[-20:]))
        refs = git(os.path.join(daemon.base, f"{name}.git"), "for-each-ref",
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
    with gitbench.workspace("inflight-bench-latency-", proxy_delay=DELAY_S) as (tmp, daemon, proxy):
        print(f"shutdown_push_latency: git daemon behind a proxy adding {DELAY_S * 1000:.0f} ms "
              f"each way, {args.reps} repetitions, medians")
        for n in args.runs:
            ours, theirs = gitbench.alternate(
                args.reps, lambda rep: serve_shutdown(daemon, proxy, n, f"s{n}-{rep}"),
                lambda rep: git_push_all(daemon, proxy, tmp, n, f"g{n}-{rep}"))
            a, b = (statistics.median(took for took, _ in x) for x in (ours, theirs))
            print(f"  {n:3d} runs: serve SIGTERM->exit {a * 1000:7.0f} ms ({ours[-1][1]} connections)"
                  f" | git push of {n} branches {b * 1000:6.0f} ms ({theirs[-1][1]} connection(s))"
                  f" | ratio {a / b:.2f} (goal <= {GOAL})")


if __name__ == "__main__":
    main()
