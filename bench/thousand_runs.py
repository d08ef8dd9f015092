#!/usr/bin/python3
"""A thousand runs per pod: `inflight serve --max-concurrent N` holding N
running demo children and M - N queued runs (M submitted in all; defaults
N = 200, M = 1000), against a `git daemon` results repo reached through a
RelayProxy (no delay by default, so that per-run costs are not hidden behind
round trips; --delay-ms adds one each way as in sections 9 and 10; the proxy
counts connections). The children are `inflight-demo-eval --tests 99999
--test-ms 86400000`: after their start line they sleep and write nothing.
`--checkpoint-interval 0` (periodic saves are measured in sections 5 and 6).

Measured in one run, each with its baseline:

1. Memory: VmRSS, VmHWM, RssAnon, threads and open descriptors of serve
   (/proc/PID/status, /proc/PID/fd) with 0 runs, with N running, and with N
   running + M - N queued. Baseline: the same serve with 0 runs. Per run:
   (loaded - empty) / M, and split into per running and per queued run. The
   run shims (serve's children, one per running run) are counted apart
   (VmRSS and Pss from smaps_rollup).
2. CPU per idle second: utime+stime ticks, on-CPU ns (schedstat) and context
   switches of serve over a window (--window, default 10 s) in which nothing
   is sent to it. Baseline: an idle serve with 0 runs over the same window
   (a count of `sleep` processes would say nothing). Reported per run per
   second; the shims' and children's CPU beside it.
3. SIGTERM -> exit of the loaded serve, every run pushed: checked by the count
   of refs/heads/inflight/ branches (running and queued runs are both
   checkpointed at shutdown, docs/serve.md "Shutdown"). Split by
   serve's own log (`children stopped` seconds, `shutdown complete` seconds).
   Fixed cost: SIGTERM -> exit of the idle serve with 0 runs (it releases its
   lease). Baseline: one `git push` of the very branches serve pushed (fetched
   beforehand from the results repo into a local bare repo, untimed) to a
   fresh repo through the same proxy; --reps times, median. Serve's shutdown
   is measured once (it needs the whole load again).
4. Restore of the M branches: a new pod (`--pod-name pod-b`, empty disk,
   `--max-concurrent 1` as in restore_latency.py) on a copy of the repo,
   timed from spawn to its `ready` log line, whose `restored` must be M; its
   RSS at ready. Fixed cost: spawn -> ready of the idle serve (empty repo).
   Baseline: `git fetch` of the M branches into a fresh bare repo through the
   proxy. --reps repetitions (default 3) alternating; medians.

Per-run costs (KB, descriptors, CPU us/s, ms of submit, shutdown and restore)
are printed as COST lines; RATIO lines compare serve with its baselines. No
pass/fail assertion. Full scale holds about 2N+1 processes for the load,
writes about 4 files per run and needs a few hundred descriptors in serve.
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import gitbench
from inflight_testing.git_servers import git
from inflight_testing.procfs import cpu, stat_fields, status_fields
from inflight_testing.waiting import wait_for
from restore_latency import fresh_copy, git_fetch
from serve_process import BenchServe, started

TEST_MS = 86_400_000  # the demo template's maximum: one test lasts a day
BRANCHES = "refs/heads/inflight/"


def kb(value):  # "5420 kB" -> 5420
    return int(value.split()[0])


def memory(pid):
    """RSS figures (KB), threads and open descriptors of one process."""
    st = status_fields(pid)
    return {"rss": kb(st["VmRSS"]), "hwm": kb(st["VmHWM"]), "anon": kb(st["RssAnon"]),
            "threads": int(st["Threads"]), "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def fd_kinds(pid):
    """{kind: count} of a process's descriptors: socket, pipe, anon_inode:[...],
    or the directory of a file."""
    kinds = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        kind = target.split(":[", 1)[0] if ":[" in target else target
        if kind.startswith("anon_inode:"):
            kind = target
        elif kind.startswith("/"):
            kind = "file " + os.path.dirname(kind)
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def pss(pid):
    """Proportional set size (KB) from /proc/PID/smaps_rollup."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return kb(line.split(":", 1)[1])
    return 0


def nofile(pid):
    """(soft, hard) limit on open files of a process."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return soft, hard
    return "?", "?"


def descendants(pid):
    """(shims, their children): serve's children and theirs, from one scan of /proc."""
    kids = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            kids.setdefault(int(stat_fields(stat.parent.name)[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    shims = sorted(kids.get(pid, []))
    return shims, sorted(c for s in shims for c in kids.get(s, []))


def cpu_sum(pids):
    """cpu() summed over processes, as (ticks, ns, switches)."""
    total = [0, 0, 0]
    for p in pids:
        for k, v in enumerate(cpu(p)):
            total[k] += v
    return total


def cpu_window(pid, others, seconds):
    """CPU of `pid` and of `others` (summed) over a window in which nothing is
    sent to serve; returns (elapsed s, serve deltas, others' deltas)."""
    s0, o0 = cpu(pid), cpu_sum(others)
    t0 = time.monotonic()
    time.sleep(seconds)  # the measuring window itself
    s1, o1 = cpu(pid), cpu_sum(others)
    return (time.monotonic() - t0, [b - a for a, b in zip(s0, s1)],
            [b - a for a, b in zip(o0, o1)])


def serve_args(daemon, proxy, repo, pod, n, m, args):
    return ["--results-repo", daemon.url(repo, proxy.port), "--checkpoint-interval", "0",
            "--max-concurrent", str(n), "--max-queued", str(m), "--pod-name", pod,
            "--grace-period", args.grace_period, "--containment", args.containment]


def idle_serve(daemon, proxy, args):
    """The same serve with 0 runs: spawn -> ready, memory, an idle CPU window,
    SIGTERM -> exit."""
    daemon.new_repo("empty.git")
    t0 = time.monotonic()
    serve = BenchServe(serve_args(daemon, proxy, "empty.git", "pod-e", 1, 1, args))
    try:
        ready = serve.wait_log(lambda e: e.get("msg") == "ready", 60)
        spawn_ready = time.monotonic() - t0
        if ready.get("restored") != 0:
            raise RuntimeError(f"empty serve restored {ready.get('restored')}")
        mem = memory(serve.proc.pid)
        window = cpu_window(serve.proc.pid, [], args.window)
        before = proxy.connections
        t0 = time.monotonic()
        code = serve.stop(timeout=120)
        stop = time.monotonic() - t0
        if code != 0:
            raise RuntimeError(f"empty serve exited {code}: " + "".join(serve.lines[-20:]))
        proxy.settled()
        return {"ready": spawn_ready, "mem": mem, "window": window, "stop": stop,
                "stop_conns": proxy.connections - before}
    finally:
        serve.cleanup()


def loaded_serve(daemon, proxy, args):
    """N running + M - N queued: memory at each stage, an idle CPU window, then
    SIGTERM -> exit with every run pushed."""
    n, m = args.running, args.queued
    daemon.new_repo("a.git")
    serve = BenchServe(serve_args(daemon, proxy, "a.git", "pod-a", n, m, args))
    pid = serve.proc.pid
    out = {"nofile": nofile(pid)}
    try:
        serve.wait_log(lambda e: e.get("msg") == "ready", 60)
        out["containment"] = next(e["msg"] for e in serve.events()
                                  if e.get("msg", "").startswith("containment:"))
        out["mem0"] = memory(pid)
        log0 = sum(map(len, serve.lines))

        # N runs that start at once
        t0 = time.monotonic()
        ids = [serve.submit(id=f"run-{i:04d}", tests=99999, test_ms=TEST_MS) for i in range(n)]
        out["submit_running"] = time.monotonic() - t0
        seen = [0]

        def nth_start(e):
            seen[0] += e.get("msg") == "attempt started"
            return seen[0] >= n
        serve.wait_log(nth_start, 60 + n)
        wait_for(lambda: all(started(serve.runs_dir, i) for i in ids), 60 + n,
                 f"every child's start line ({n})", interval=0.1)
        out["t_running"] = time.monotonic() - t0
        shims, children = descendants(pid)
        if len(shims) != n or len(children) != n:
            raise RuntimeError(f"{len(shims)} shims and {len(children)} children of serve, not {n}")
        out["memN"] = memory(pid)
        out["fdsN"] = fd_kinds(pid)
        out["fds_shim"] = fd_kinds(shims[0])
        out["shims"] = (sum(memory(s)["rss"] for s in shims), sum(pss(s) for s in shims),
                        sum(memory(s)["fds"] for s in shims))
        out["children"] = (sum(memory(c)["rss"] for c in children), sum(pss(c) for c in children))

        # M - N runs that queue
        t0 = time.monotonic()
        ids += [serve.submit(id=f"run-{i:04d}", tests=99999, test_ms=TEST_MS) for i in range(n, m)]
        out["submit_queued"] = time.monotonic() - t0
        out["memM"] = memory(pid)
        t0 = time.monotonic()
        r = serve.get("/api/eval/runs", timeout=60)
        out["list"] = (time.monotonic() - t0, len(r.body))
        out["memL"] = memory(pid)
        statuses = [run["status"] for run in r.json()["runs"]]
        out["statuses"] = {s: statuses.count(s) for s in sorted(set(statuses))}
        if out["statuses"] != ({"running": n, "queued": m - n} if m > n else {"running": n}):
            raise RuntimeError(f"runs by status: {out['statuses']}")
        out["log_load"] = sum(map(len, serve.lines)) - log0

        # idle window: nothing is sent to serve from here until SIGTERM
        out["window"] = cpu_window(pid, shims + children, args.window)
        out["memW"] = memory(pid)

        lines0 = len(serve.lines)
        before = proxy.connections
        t0 = time.monotonic()
        code = serve.stop(timeout=600)
        out["stop"] = time.monotonic() - t0
        if code != 0:
            raise RuntimeError(f"serve exited {code}: " + "".join(serve.lines[-20:]))
        proxy.settled(60)
        out["stop_conns"] = proxy.connections - before
        out["stopped_s"] = serve.logged("children stopped")["seconds"]
        out["complete_s"] = serve.logged("shutdown complete")["seconds"]
        out["pushed_lines"] = sum(e.get("msg") == "checkpoint pushed" for e in serve.events())
        out["log_stop"] = sum(map(len, serve.lines[lines0:]))
        refs = git(os.path.join(daemon.base, "a.git"), "for-each-ref", BRANCHES).splitlines()
        out["refs"] = len(refs)
        if len(refs) != m:
            raise RuntimeError(f"{len(refs)} branches pushed, not {m}")
        return out
    finally:
        serve.cleanup()


def git_push(daemon, proxy, tmp, rep):
    """One `git push` of every branch serve pushed, from a local bare repo that
    fetched them beforehand (untimed), to a fresh repo through the proxy."""
    local = os.path.join(tmp, "push-source.git")
    if not os.path.isdir(local):
        git(None, "init", "-q", "--bare", local)
        git(local, "fetch", "-q", os.path.join(daemon.base, "a.git"), f"{BRANCHES}*:{BRANCHES}*")
    name = f"g{rep}.git"
    daemon.new_repo(name)
    before = proxy.connections
    t0 = time.monotonic()
    git(local, "push", "-q", daemon.url(name, proxy.port), f"{BRANCHES}*:{BRANCHES}*", timeout=600)
    took = time.monotonic() - t0
    proxy.settled(60)
    return took, proxy.connections - before


def serve_restore(daemon, proxy, m, args, rep):
    """pod-b on a copy of the repo: spawn -> ready, which must say `restored` M."""
    repo = fresh_copy(os.path.join(daemon.base, "a.git"), daemon, f"s{rep}.git")
    before = proxy.connections
    t0 = time.monotonic()
    serve = BenchServe(serve_args(daemon, proxy, repo, "pod-b", 1, m, args))
    try:
        ready = serve.wait_log(lambda e: e.get("msg") == "ready", 120 + m)
        took = time.monotonic() - t0
        connections = proxy.connections - before
        if ready.get("restored") != m:
            raise RuntimeError(f"restored {ready.get('restored')} of {m}: " + "".join(serve.lines[-20:]))
        mem = memory(serve.proc.pid)
        serve.stop(timeout=600)
        return took, connections, mem
    finally:
        serve.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--running", type=int, default=200, help="runs running at once (--max-concurrent)")
    ap.add_argument("--queued", type=int, default=1000,
                    help="runs submitted in all (M - N of them queue; --max-queued M)")
    ap.add_argument("--window", type=float, default=10.0, help="idle CPU window, seconds")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of restore and of the baselines")
    ap.add_argument("--delay-ms", type=float, default=0.0,
                    help="latency the proxy adds each way (default 0; sections 9-10 use 25)")
    ap.add_argument("--containment", default="auto", choices=["auto", "cgroup", "shim"])
    ap.add_argument("--grace-period", default="300s")
    args = ap.parse_args()
    n, m = args.running, args.queued
    if not 0 < n <= m:
        ap.error("need 0 < --running <= --queued")

    with gitbench.workspace("inflight-bench-thousand-", proxy_delay=args.delay_ms / 1000) as (
            tmp, daemon, proxy):
        print(f"thousand_runs: {n} running + {m - n} queued demo runs ({m} in all), git daemon "
              f"behind a proxy adding {args.delay_ms:g} ms each way, CPU window {args.window:g} s, "
              f"{args.reps} repetitions of restore and baselines; ulimit -n of this shell: "
              f"{' / '.join(nofile(os.getpid()))} (soft / hard)")
        idle = idle_serve(daemon, proxy, args)
        load = loaded_serve(daemon, proxy, args)
        pushes = [git_push(daemon, proxy, tmp, rep) for rep in range(args.reps)]
        restores, fetches = gitbench.alternate(
            args.reps, lambda rep: serve_restore(daemon, proxy, m, args, rep),
            lambda rep: git_fetch(daemon, proxy, os.path.join(daemon.base, "a.git"), m, tmp,
                                  f"f{rep}.git"))

    med = lambda xs: statistics.median(xs)
    mem0, memN, memM, memW = load["mem0"], load["memN"], load["memM"], load["memW"]
    q = m - n
    print(f"  {load['containment']}; serve's limit on open files {' / '.join(load['nofile'])}")

    print("1. memory of serve (KB)")
    for label, mm in (("0 runs (idle serve, pod-e)", idle["mem"]), ("0 runs (loaded serve at ready)", mem0),
                      (f"{n} running", memN), (f"{n} running + {q} queued", memM),
                      ("after one GET /api/eval/runs", load["memL"]),
                      ("after the idle CPU window", memW)):
        print(f"   {label:<32} VmRSS {mm['rss']:7d}  VmHWM {mm['hwm']:7d}  RssAnon {mm['anon']:7d}  "
              f"threads {mm['threads']}  fds {mm['fds']}")
    shim_rss, shim_pss, shim_fds = load["shims"]
    child_rss, child_pss = load["children"]
    print(f"   {n} run shims: VmRSS sum {shim_rss} KB, Pss sum {shim_pss} KB, fds sum {shim_fds}; "
          f"{n} demo children: VmRSS sum {child_rss} KB, Pss sum {child_pss} KB")
    kinds = lambda d: ", ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: -kv[1]))
    print(f"   serve's descriptors with {n} running: {kinds(load['fdsN'])}")
    print(f"   one shim's descriptors: {kinds(load['fds_shim'])}")
    print(f"   GET /api/eval/runs with {m} runs: {load['list'][0] * 1000:.0f} ms, "
          f"{load['list'][1] / 1024:.0f} KB; runs by status {load['statuses']}")

    el, sd, od = load["window"]
    iel, isd, _ = idle["window"]
    print("2. CPU over the idle window")
    print(f"   idle serve, 0 runs, {iel:.1f} s: {isd[0]} ticks, {isd[1] / 1e6:.3f} ms on CPU, "
          f"{isd[2]} context switches")
    print(f"   loaded serve, {el:.1f} s: {sd[0]} ticks, {sd[1] / 1e6:.3f} ms on CPU, "
          f"{sd[2]} context switches")
    print(f"   {n} shims + {n} children, same window: {od[0]} ticks, {od[1] / 1e6:.3f} ms on CPU, "
          f"{od[2]} context switches")

    push_s = med([t for t, _ in pushes])
    print("3. SIGTERM -> exit")
    print(f"   idle serve, 0 runs: {idle['stop'] * 1000:.0f} ms ({idle['stop_conns']} connection(s))")
    print(f"   loaded serve: {load['stop'] * 1000:.0f} ms ({load['stop_conns']} connection(s)); "
          f"its log: children stopped at {load['stopped_s'] * 1000:.0f} ms, shutdown complete at "
          f"{load['complete_s'] * 1000:.0f} ms; {load['pushed_lines']} `checkpoint pushed` lines, "
          f"{load['refs']} branches on the server")
    print(f"   git push of the same {m} branches: median {push_s * 1000:.0f} ms "
          f"({', '.join(f'{t * 1000:.0f}' for t, _ in pushes)}; {pushes[-1][1]} connection(s))")

    restore_s = med([t for t, _, _ in restores])
    fetch_s = med([t for t, _ in fetches])
    rmem = restores[-1][2]
    print(f"4. restore of {m} branches (pod-b, --max-concurrent 1)")
    print(f"   idle serve spawn -> ready (empty repo): {idle['ready'] * 1000:.0f} ms")
    print(f"   serve spawn -> ready: median {restore_s * 1000:.0f} ms "
          f"({', '.join(f'{t * 1000:.0f}' for t, _, _ in restores)}; {restores[-1][1]} connections); "
          f"pod-b at ready: VmRSS {rmem['rss']} KB, VmHWM {rmem['hwm']} KB, fds {rmem['fds']}")
    print(f"   git fetch of {m} branches: median {fetch_s * 1000:.0f} ms "
          f"({', '.join(f'{t * 1000:.0f}' for t, _ in fetches)}; {fetches[-1][1]} connection(s))")

    print("where the cost per run goes")
    print(f"COST serve RSS per run = {(memM['rss'] - mem0['rss']) / m:.1f} KB "
          f"(per running run {(memN['rss'] - mem0['rss']) / n:.1f} KB, per queued run "
          f"{(memM['rss'] - memN['rss']) / q if q else 0:.1f} KB; VmHWM per run "
          f"{(memM['hwm'] - mem0['hwm']) / m:.1f} KB)")
    print(f"COST shim per running run = {shim_rss / n:.0f} KB VmRSS, {shim_pss / n:.0f} KB Pss, "
          f"{shim_fds / n:.1f} fds (the demo child itself: {child_pss / n:.0f} KB Pss)")
    print(f"COST serve fds per running run = {(memN['fds'] - mem0['fds']) / n:.2f}, per queued run "
          f"{(memM['fds'] - memN['fds']) / q if q else 0:.2f}")
    print(f"COST submit = {load['submit_running'] / n * 1000:.2f} ms per started run, "
          f"{load['submit_queued'] / q * 1000 if q else 0:.2f} ms per queued run (sequential "
          f"HTTP from this script); {n} running and started after {load['t_running']:.2f} s")
    print(f"COST serve CPU per run per idle second = {sd[1] / 1e3 / el / m:.3f} us "
          f"({sd[0]} ticks); idle serve with 0 runs {isd[1] / 1e3 / iel:.3f} us/s")
    print(f"COST log bytes per run = {load['log_load'] / m:.0f} while loading, "
          f"{load['log_stop'] / m:.0f} at shutdown")
    print(f"COST shutdown per run = {(load['stop'] - idle['stop']) / m * 1000:.2f} ms "
          f"(serve, less the 0-run shutdown) vs {push_s / m * 1000:.2f} ms (git push)")
    print(f"COST restore per run = {(restore_s - idle['ready']) / m * 1000:.2f} ms "
          f"(serve, less the 0-run spawn -> ready) vs {fetch_s / m * 1000:.2f} ms (git fetch); "
          f"pod-b RSS per restored run {(rmem['rss'] - idle['mem']['rss']) / m:.1f} KB")

    print(f"RATIO serve_rss loaded/empty = {memM['rss'] / mem0['rss']:.2f}")
    print("RATIO serve_cpu loaded/idle = " + (f"{sd[1] / isd[1]:.1f}" if isd[1] else "n/a") +
          f" (on-CPU ns over the window: loaded {sd[1]}, idle {isd[1]})")
    print(f"RATIO shutdown serve/git_push = {load['stop'] / push_s:.2f} (one serve shutdown; "
          f"section 9's goal for 20-100 runs <= 1.5)")
    print(f"RATIO restore serve/git_fetch = {restore_s / fetch_s:.2f} "
          f"(section 10's goal for 100 runs <= 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
