#!/usr/bin/python3
"""Restore of N checkpoint branches by a new pod, through a proxy that adds
25 ms each way to a `git daemon` (a hosted git service's round trip).

Setup (untimed, once): `inflight serve` as pod-a runs N demo runs and is
stopped with SIGTERM, which pushes N `inflight/pod-a/<run>` branches with
shutdown tips. Each repetition starts from a copy of that repo.

inflight: `inflight serve --pod-name pod-b` on an empty disk, timed from its
spawn to its `ready` log line: one listing and download of every branch, a
claim of each, every run dir materialised (`--max-concurrent 1`, so the
children do not compete with it for the 2 cores).

Baseline, same run, same daemon and proxy: `git fetch` of the same N
branches into a fresh repo, timed from spawn to exit.

Repetitions alternate which goes first (default 3; --reps); medians are
reported, with the connections the proxy saw. Goal: serve/git <= 2 for
N = 100 (issue 10). No pass/fail assertion.

--cold drops the kernel's page, dentry and inode caches (`sync`, then
/proc/sys/vm/drop_caches; root only) right before each timed restore and
each timed fetch: the disk as a node finds it when the host reclaimed its
page cache, where every new directory entry costs a read of the disk.
"""
import argparse
import os
import shutil
import statistics
import time

import gitbench
from inflight_testing.git_servers import git
from serve_process import BenchServe
from shutdown_push_latency import DELAY_S

GOAL = 2.0


def make_branches(daemon, n):
    """The bare repo of N interrupted runs of pod-a, each with a shutdown tip."""
    daemon.new_repo("template.git")
    serve = BenchServe(["--results-repo", daemon.url("template.git"), "--checkpoint-interval", "0",
                        "--max-concurrent", str(n), "--pod-name", "pod-a"])
    try:
        serve.start_long_runs(n, "run")
        code = serve.stop(timeout=120)
        if code != 0:
            raise RuntimeError(f"pod-a exited {code}: " + "".join(serve.lines[-20:]))
    finally:
        serve.cleanup()
    return os.path.join(daemon.base, "template.git")


def fresh_copy(template, daemon, name):
    shutil.copytree(template, os.path.join(daemon.base, name))
    return name


def drop_caches(cold):
    if not cold:
        return
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def serve_restore(daemon, proxy, template, n, name, cold):
    repo = fresh_copy(template, daemon, name)
    drop_caches(cold)
    before = proxy.connections
    t0 = time.monotonic()
    serve = BenchServe(["--results-repo", daemon.url(repo, proxy.port), "--checkpoint-interval", "0",
                        "--max-concurrent", "1", "--pod-name", "pod-b", "--grace-period", "120s"])
    try:
        ready = serve.wait_log(lambda e: e.get("msg") == "ready", 120)
        took = time.monotonic() - t0
        connections = proxy.connections - before
        if ready.get("restored") != n:
            raise RuntimeError(f"restored {ready.get('restored')} of {n}: " + "".join(serve.lines[-20:]))
        serve.stop(timeout=120)
        return took, connections
    finally:
        serve.cleanup()


def git_fetch(daemon, proxy, template, n, tmp, name, cold):
    repo = fresh_copy(template, daemon, name)
    work = os.path.join(tmp, f"{name}-fetch")
    git(None, "init", "-q", "--bare", work)
    drop_caches(cold)
    before = proxy.connections
    t0 = time.monotonic()
    git(work, "fetch", "-q", daemon.url(repo, proxy.port),
                 "refs/heads/inflight/*:refs/remotes/results/inflight/*")
    took = time.monotonic() - t0
    fetched = git(work, "for-each-ref", "refs/remotes/results/inflight/").splitlines()
    if len(fetched) != n:
        raise RuntimeError(f"git fetched {len(fetched)} of {n} branches")
    return took, proxy.connections - before


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--cold", action="store_true",
                    help="drop the kernel's caches before each timed step (root)")
    args = ap.parse_args()
    with gitbench.workspace("inflight-bench-restore-", proxy_delay=DELAY_S) as (tmp, daemon, proxy):
        n = args.runs
        template = make_branches(daemon, n)
        print(f"restore_latency: {n} branches, git daemon behind a proxy adding "
              f"{DELAY_S * 1000:.0f} ms each way, {args.reps} repetitions, medians"
              + (", caches dropped before each step" if args.cold else ""))
        ours, theirs = gitbench.alternate(
            args.reps,
            lambda rep: serve_restore(daemon, proxy, template, n, f"s{rep}.git", args.cold),
            lambda rep: git_fetch(daemon, proxy, template, n, tmp, f"g{rep}.git", args.cold))
        a, b = (statistics.median(took for took, _ in x) for x in (ours, theirs))
        print(f"  serve spawn->ready {a * 1000:7.0f} ms ({ours[-1][1]} connections, "
              f"lease and claims included) | git fetch of {n} branches {b * 1000:6.0f} ms "
              f"({theirs[-1][1]} connection(s)) | ratio {a / b:.2f} (goal <= {GOAL})")


if __name__ == "__main__":
    main()
