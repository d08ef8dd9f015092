#!/usr/bin/python3
"""Pushes per pod per checkpoint interval through a 4-pod rolling restart,
the end of every run included (issue 10: a rollout of 4 pods made 163 pushes
for 32 runs; each finished run was a push of its final commit and another of
its deletion).

Four pods `inflight serve --pod-name pod-N --checkpoint-interval 2s
--results-repo git://<proxy of pod-N>/results.git --max-concurrent 32`, each
on a disk (runs dir) of its own and with a connection-counting proxy of its
own in front of one shared `git daemon` repo, so that every connection is
counted for the pod that made it. Each pod is given 8 demo runs (32 in all;
tests 20..40, test_ms 200..500, so that they end at different times). Once
every run has a checkpoint, a rollout as a Deployment with maxSurge 1 makes
it: in turn, a new pod (a new name, an empty disk, a proxy of its own)
starts and turns ready, then one old pod gets SIGTERM and is waited for, a
few seconds between pods. The new pods take the runs the old ones handed
over. The bench waits until every run is published (32
refs/inflight-results/*) and no run branch (refs/heads/inflight/*) is left,
then stops the new pods (SIGTERM) as well.

Counted per pod: the connections its proxy saw, told apart by the service
named in their first pkt-line (git-receive-pack: a push or a listing made to
push; git-upload-pack: a listing or a fetch), and the pod's "checkpoint
pushed", "checkpoint branch deleted" and "run restored" log lines. Hooks in
the daemon's repo record the refs each push asked for (pre-receive) and those
it updated (post-receive, with the commit subjects, which say `periodic`,
`shutdown`, `claim`, `final`), so the pushes are told apart by what they
carried, and a receive-pack connection that updated nothing is either a push
that did not land or a listing; git daemon gives the hooks the proxy's
outgoing port, which names the pod. (The hooks add a few ms to each push.)

Figure: pushes per pod per interval = receive-pack connections / sum over
the pods of (the pod's life, spawn to exit, / 2 s). Goal <= 1.5.
Baseline, same run: the run checkpoints that landed ("checkpoint pushed"),
per pod per interval: what one push per run checkpoint (a naive per-run
pusher) would make, before counting its finals and deletions.

Correctness is checked (exit 1 when it fails): every run published, with its
index entry `succeeded` and every test once in its result's index.jsonl; no
run branch left; every pod exited 0. No pass/fail assertion on the counts.
"""
import argparse
import collections
import json
import os
import stat
import sys
import time

import gitbench
from inflight_testing.git_servers import git
from inflight_testing.proxies import RelayProxy
from inflight_testing.results_index import index_entries
from inflight_testing.serve import parse_log_line
from inflight_testing.waiting import wait_for
from serve_process import BenchServe

INTERVAL_S = 2
GOAL = 1.5
REPO = "results.git"
ZERO = "0" * 40

# The hooks: one file per push, written whole (rename): pre-receive's has
# every ref the push asked to update, post-receive's those it updated, with
# their commits' subjects. REMOTE_PORT is set by git daemon: the proxy's
# outgoing port, which names the pod.
HOOK = r"""#!/bin/sh
f="{dir}/$(date +%s.%N)-$$"
cat > "$f.refs"
news=$(awk '$2 !~ /^0+$/ {{print $2}}' "$f.refs" | sort -u)
{{
  echo "port ${{REMOTE_PORT:-}}"
  echo "refs"
  cat "$f.refs"
  echo "subjects"
  [ -z "$news" ] || git show -s --format='%H %s' $news
}} > "$f.tmp"
rm -f "$f.refs"
mv "$f.tmp" "$f.{hook}"
"""


def service_of(head):
    """The git service a git:// request names in its first pkt-line
    (`0032git-upload-pack /results.git\\0host=...`), None while too few
    bytes arrived, "?" for anything else."""
    if len(head) < 5:
        return None
    space = head.find(b" ", 4)
    if space < 0:
        return None if len(head) < 64 else "?"
    return head[4:space].decode(errors="replace")


class ServiceCountingProxy(RelayProxy):
    """A RelayProxy (delay 0) that keeps a record of each connection: when it
    opened and closed, the local port of its connection to the daemon (the
    REMOTE_PORT git daemon gives the hook) and the service its first pkt-line
    asks for."""

    def __init__(self, target_port):
        self.conns = []
        self._of = {}  # socket (either end) -> its record
        super().__init__(target_port)

    def _accept(self):
        super()._accept()
        client, server = list(self.pipes)[-2:]  # the pair super() just added
        conn = {"opened": time.monotonic(), "closed": None, "service": None, "head": b"",
                "port": server.getsockname()[1], "socks": (client, server)}
        with self.cond:
            self.conns.append(conn)
        self._of[client] = self._of[server] = conn

    def _forward(self, sock, data):
        conn = self._of.get(sock)
        if conn and data and conn["service"] is None and sock is conn["socks"][0]:
            conn["head"] += data
            conn["service"] = service_of(conn["head"])
        super()._forward(sock, data)
        if conn and sock not in self.pipes:  # both ends ended: closed
            conn["closed"] = time.monotonic()
            for s in conn["socks"]:
                self._of.pop(s, None)

    def records(self):
        with self.cond:
            return list(self.conns)

    def count(self, service):
        return sum(c["service"] == service for c in self.records())


class TimedServe(BenchServe):
    """BenchServe whose log events carry the time they arrived ("_t",
    monotonic): serve's own timestamps are whole seconds."""

    def _parsed(self, line):
        event = parse_log_line(line)
        event["_t"] = time.monotonic()
        return event


class Pod:
    def __init__(self, name, daemon, t0, max_concurrent):
        self.name = name
        self.proxy = ServiceCountingProxy(daemon.port)
        self.url = daemon.url(REPO, port=self.proxy.port)
        self.args = ["--pod-name", name, "--results-repo", self.url,
                     "--checkpoint-interval", f"{INTERVAL_S}s",
                     "--max-concurrent", str(max_concurrent)]
        self.started = time.monotonic() - t0
        try:
            self.serve = TimedServe(self.args)
        except BaseException:
            self.proxy.close()
            raise
        self.serve.wait_ready(60)
        self.ready = time.monotonic() - t0
        self.signalled = self.ended = self.code = None

    def stop(self, t0):
        self.signalled = time.monotonic() - t0
        self.code = self.serve.stop(timeout=60)
        self.ended = time.monotonic() - t0
        return self.code

    def life(self, now):
        return (self.ended if self.ended is not None else now) - self.started

    def logged(self, msg):
        return sum(e.get("msg") == msg for e in self.serve.events())


def install_hooks(bare, tmp):
    logs = os.path.join(tmp, "pushes")
    os.makedirs(logs)
    for hook in ("pre-receive", "post-receive"):
        path = os.path.join(bare, "hooks", hook)
        with open(path, "w") as f:
            f.write(HOOK.format(dir=logs, hook=hook))
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return logs


def read_pushes(logs, hook):
    """[{port, time, refs: [(old, new, ref)], subjects: {sha: subject}}] that
    `hook` logged, in time order."""
    pushes = []
    for name in sorted(os.listdir(logs)):
        if not name.endswith("." + hook):
            continue
        push = {"time": float(name.split("-")[0]), "port": None, "refs": [], "subjects": {}}
        section = None
        with open(os.path.join(logs, name)) as f:
            for line in f.read().splitlines():
                if line.startswith("port "):
                    push["port"] = int(line[5:]) if line[5:].isdigit() else None
                elif line in ("refs", "subjects"):
                    section = line
                elif section == "refs":
                    push["refs"].append(tuple(line.split(" ", 2)))
                elif section == "subjects":
                    sha, _, subject = line.partition(" ")
                    push["subjects"][sha] = subject
        pushes.append(push)
    return pushes


def ref_kind(old, new, ref, subjects):
    """What one ref update was: run checkpoint by reason, run branch deleted,
    result, index, lease (renewed, taken, given up)."""
    if ref.startswith("refs/heads/inflight/"):
        if new == ZERO:
            return "run branch deleted"
        subject = subjects.get(new, "")
        reason = subject[subject.rfind("(") + 1:-1] if subject.endswith(")") else "?"
        return f"run checkpoint ({reason})"
    if ref.startswith("refs/inflight-results/"):
        return "result"
    if ref == "refs/inflight-archive/results":
        return "fold"
    if ref == "refs/heads/inflight-runs-log":
        return "index"
    if ref == "refs/heads/inflight-index":
        subject = subjects.get(new, "")
        runs = subject.rsplit(" ", 2)[-2] if subject.endswith(" runs") else "1"
        return f"index ({runs} run{'s' if runs != '1' else ''})" if subject else "index"
    if ref.startswith("refs/heads/inflight-lease/"):
        return "lease given up" if new == ZERO else "lease taken" if old == ZERO else "lease renewed"
    return "other " + ref


def push_kind(push):
    """A push's label: the kinds of ref it updated, the run refs counted."""
    kinds = collections.Counter(ref_kind(*r, push["subjects"]) for r in push["refs"])
    return " + ".join(f"{k} x{n}" if k.startswith(("run", "result")) else k
                      for k, n in sorted(kinds.items()))


def push_family(push):
    """A coarser label, the same for pushes of any number of runs."""
    kinds = {ref_kind(*r, push["subjects"]) for r in push["refs"]}
    return " + ".join(sorted(kinds))


def run_plan(pods, per_pod):
    """(pod index, run id, tests, test_ms) of every run; tests 20..40 and
    test_ms 200..500 spread over the runs, so that they end 4..20 s apart."""
    plan = []
    for p in range(pods):
        for j in range(per_pod):
            k = p * per_pod + j
            plan.append((p, f"r{k:02d}", 20 + (k * 13) % 21, 200 + (k * 7 % 4) * 100))
    return plan


def check_results(bare, plan):
    """Problems with what the repo holds at the end, [] when every run is
    published once, complete, and no run branch is left."""
    problems = []
    results = set(git(bare, "for-each-ref", "--format=%(refname:lstrip=2)",
                      "refs/inflight-results/").split())
    expected = {run_id for _, run_id, _, _ in plan}
    if results != expected:
        problems.append(f"results: missing {sorted(expected - results)}, "
                        f"extra {sorted(results - expected)}")
    left = git(bare, "for-each-ref", "--format=%(refname)", "refs/heads/inflight/").split()
    if left:
        problems.append(f"run branches left: {left}")
    entries = index_entries(bare)
    for _, run_id, tests, _ in plan:
        if run_id not in results:
            continue
        entry = entries.get(run_id)
        if entry is None:
            problems.append(f"{run_id}: no index entry")
            continue
        if entry.get("final_status") != "succeeded":
            problems.append(f"{run_id}: final_status {entry.get('final_status')}")
        ids = [json.loads(line)["test_id"] for line in
               git(bare, "show", f"refs/inflight-results/{run_id}:index.jsonl").splitlines()]
        if sorted(ids) != [f"t{n:03d}" for n in range(1, tests + 1)]:
            dup = [t for t, n in collections.Counter(ids).items() if n > 1]
            problems.append(f"{run_id}: {len(ids)} records for {tests} tests, repeated {dup}")
    return problems


def attempts_by_run(bare, plan):
    """{run id: [(pod, outcome)]} from the index entries."""
    entries = index_entries(bare)
    return {run_id: [(a.get("pod"), a.get("outcome"))
                     for a in entries.get(run_id, {}).get("attempts", [])]
            for _, run_id, _, _ in plan}


def hook_push_of(conn, hook_pushes, t0):
    """The hook's record of the push made on `conn` (same daemon-side port,
    within the connection's life), or None."""
    opened, closed = conn["opened"] - t0, (conn["closed"] or float("inf")) - t0
    for push in hook_pushes:
        if push["port"] == conn["port"] and opened - 0.5 <= push["t"] <= closed + 0.5:
            return push
    return None


def connection_kind(conn, hook_pushes, attempts_logged, t0):
    """What a receive-pack connection did: the refs its push updated; or the
    refs it asked for and did not get; or nothing (it only listed the refs)."""
    push = hook_push_of(conn, hook_pushes, t0)
    if push:
        return push_kind(push)
    asked = hook_push_of(conn, attempts_logged, t0)
    if asked:
        return "NOT LANDED: " + push_kind(asked)
    return "(no command: a listing)"


def purpose(conn, hook_pushes, attempts_logged, t0):
    """Why a receive-pack connection was made, from what its push updated."""
    push = hook_push_of(conn, hook_pushes, t0)
    if not push:
        if hook_push_of(conn, attempts_logged, t0):
            return "a push that did not land (a race lost; tried again)"
        return "no command: a listing of the refs (after a push that did not land, or a look)"
    kinds = {ref_kind(*r, push["subjects"]) for r in push["refs"]}
    if any(k.startswith(("run checkpoint (final)", "result", "index", "run branch deleted"))
           for k in kinds):
        return "release of finished runs (final, result, index, deletion)"
    if "run checkpoint (claim)" in kinds:
        return "claims of runs taken over"
    if kinds & {"run checkpoint (shutdown)", "lease given up"}:
        return "shutdown (checkpoints, lease given up)"
    if "lease taken" in kinds:
        return "start (lease taken)"
    return "periodic tick (lease renewal and the runs that changed)"


def print_connections(pods, hook_pushes, attempts_logged, t0):
    print("  connections per pod (opened s, held ms, service, what the push updated):")
    for pod in pods:
        print(f"    {pod.name}: started {pod.started:.1f}, ready {pod.ready:.1f}, SIGTERM "
              f"{pod.signalled}, exited {pod.ended}" if pod.ended is None else
              f"    {pod.name}: started {pod.started:.1f}, ready {pod.ready:.1f}, SIGTERM "
              f"{pod.signalled:.1f}, exited {pod.ended:.1f}")
        lines = []
        for conn in pod.proxy.records():
            held = ((conn["closed"] or conn["opened"]) - conn["opened"]) * 1000
            service = (conn["service"] or "?").replace("git-", "")
            what = ""
            if service == "receive-pack":
                what = connection_kind(conn, hook_pushes, attempts_logged, t0)
            lines.append((conn["opened"] - t0, f"{held:6.0f} {service:13} {what}"))
        logged = collections.OrderedDict()  # a log message's lines in a row, as one
        for event in pod.serve.events():
            msg = event.get("msg", "")
            if "_t" not in event or msg in ("listening", "checkpoints go to the results repo") \
                    or msg.startswith("containment"):
                continue
            if event.get("error"):
                msg += f" ({event['error']})"
            key = (msg, round(event["_t"] - t0, 1))
            logged.setdefault(key, []).append(event.get("run_id") or event.get("branch") or "")
        for (msg, t), ids in logged.items():
            ids = [i for i in ids if i]
            lines.append((t, f"{'':6} {'log':13} {msg}" + (f" x{len(ids)}" if len(ids) > 1 else
                                                           f" {ids[0]}" if ids else "")))
        for t, line in sorted(lines, key=lambda x: x[0]):
            print(f"      {t:6.2f} {line}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=4)
    ap.add_argument("--runs-per-pod", type=int, default=8)
    ap.add_argument("--spacing", type=float, default=3.0,
                    help="seconds between one old pod's exit and the next new pod's start")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds to wait for every run to be published after the rollout")
    ap.add_argument("--connections", action="store_true",
                    help="also print each pod's connections in order, with what each push carried")
    args = ap.parse_args()
    total_runs = args.pods * args.runs_per_pod
    plan = run_plan(args.pods, args.runs_per_pod)
    old, new, problems = [], [], []
    with gitbench.workspace("inflight-bench-rollout-") as (tmp, daemon, _):
        bare, _ = daemon.new_repo(REPO)
        hook_logs = install_hooks(bare, tmp)
        t0 = time.monotonic()
        wall0 = time.time()
        events = []

        def note(what):
            events.append((time.monotonic() - t0, what))

        try:
            for p in range(args.pods):
                old.append(Pod(f"pod-{p}", daemon, t0, total_runs))
            note(f"{args.pods} pods ready")
            for p, run_id, tests, test_ms in plan:
                old[p].serve.submit(id=run_id, tests=tests, test_ms=test_ms)
            note(f"{total_runs} runs submitted")

            def checkpointed():
                ids = {e.get("run_id") for pod in old for e in pod.serve.events()
                       if e.get("msg") == "checkpoint pushed"}
                return len(ids) >= total_runs
            wait_for(checkpointed, 60, "a checkpoint of every run", interval=0.1)
            note("every run has a checkpoint")

            for n, pod in enumerate(old):
                if n:
                    time.sleep(args.spacing)  # the rollout's pace, not a wait on a condition
                new.append(Pod(f"pod-{args.pods + n}", daemon, t0, total_runs))
                note(f"{new[-1].name} started ({new[-1].started:.1f} s), ready")
                code = pod.stop(t0)
                note(f"{pod.name} SIGTERM at {pod.signalled:.1f} s, exited {code}")
                if code != 0:
                    problems.append(f"{pod.name} exited {code}")

            def all_published():
                refs = git(bare, "for-each-ref", "--format=%(refname)", "refs/inflight-results/",
                           "refs/heads/inflight/").split()
                results = sum(r.startswith("refs/inflight-results/") for r in refs)
                return results == total_runs and len(refs) == total_runs
            try:
                wait_for(all_published, args.timeout, "every run published, no run branch left",
                         interval=0.25)
            except AssertionError as e:
                problems.append(str(e))
            t_done = time.monotonic() - t0
            note("every run published, no run branch left" if not problems else "gave up waiting")
            pushes_at_done = {pod.name: pod.proxy.count("git-receive-pack") for pod in old + new}
            for pod in new:
                code = pod.stop(t0)
                if code != 0:
                    problems.append(f"{pod.name} exited {code}")
            note("new pods stopped (SIGTERM)")
            for pod in old + new:
                pod.proxy.settled()
        finally:
            for pod in old + new:
                pod.serve.cleanup()
                pod.proxy.close()
        problems += check_results(bare, plan)
        attempts = attempts_by_run(bare, plan)
        leases = git(bare, "for-each-ref", "--format=%(refname:lstrip=3)",
                     "refs/heads/inflight-lease/").split()
        hook_pushes = read_pushes(hook_logs, "post-receive")
        attempts_logged = read_pushes(hook_logs, "pre-receive")
        with open(daemon.log, errors="replace") as f:
            daemon_log = f.read()
        for push in hook_pushes + attempts_logged:  # the hooks' wall clock, on the bench's
            push["t"] = push["time"] - wall0       # time line
        report(args, plan, old, new, events, t_done, pushes_at_done, hook_pushes,
               attempts_logged, attempts, leases, daemon_log, t0)
        if args.connections:
            print_connections(old + new, hook_pushes, attempts_logged, t0)

    if problems:
        print("FAILED: " + "; ".join(problems))
        return 1
    return 0


def report(args, plan, old, new, events, t_done, pushes_at_done, hook_pushes, attempts_logged,
           attempts, leases, daemon_log, t0):
    pods = old + new
    total_runs = len(plan)
    print(f"rollout_pushes: {args.pods} pods x {args.runs_per_pod} demo runs "
          f"(tests 20..40, test_ms 200..500), --checkpoint-interval {INTERVAL_S}s, "
          f"rollout with maxSurge 1, {args.spacing:.0f} s between pods")
    print("  each pod: inflight serve --listen 127.0.0.1:0 --log-format json --runs-dir "
          "<own temp dir> " + " ".join(pods[0].args).replace(pods[0].url, "git://127.0.0.1:"
                                                             "<own proxy>/results.git")
          .replace(pods[0].name, "pod-N"))
    print("  results repo: git daemon --enable=receive-pack; pre-receive and post-receive hooks "
          "log each push's refs")
    print("  timeline (s):")
    for t, what in events:
        print(f"    {t:6.1f}  {what}")

    moved = sum(len(a) > 1 for a in attempts.values())
    print(f"  runs: {total_runs} published; {moved} moved to a new pod, "
          f"{total_runs - moved} finished on their first pod; leases left: {leases or 'none'}")

    now = max(p.ended or t_done for p in pods)
    print("  per pod: life = spawn to exit; intervals = life / 2 s; recv = receive-pack "
          "connections (pushes), upd = pushes that updated a ref (hook), fetch = upload-pack")
    print(f"    {'pod':6} {'life s':>7} {'intvl':>6} {'conns':>6} {'recv':>5} {'upd':>4} "
          f"{'fetch':>6} {'recv/intvl':>10} {'ckpt pushed':>12} {'br deleted':>11} "
          f"{'restored':>9}")
    tot = collections.Counter()
    for pod in pods:
        recs = pod.proxy.records()
        intervals = pod.life(now) / INTERVAL_S
        recv = sum(c["service"] == "git-receive-pack" for c in recs)
        fetch = sum(c["service"] == "git-upload-pack" for c in recs)
        row = {"intervals": intervals, "conns": len(recs), "recv": recv,
               "upd": sum(bool(hook_push_of(c, hook_pushes, t0)) for c in recs), "fetch": fetch,
               "ckpt": pod.logged("checkpoint pushed"),
               "deleted": pod.logged("checkpoint branch deleted"),
               "restored": pod.logged("run restored"),
               "other": len(recs) - recv - fetch}
        tot.update(row)
        print(f"    {pod.name:6} {pod.life(now):7.1f} {intervals:6.1f} {row['conns']:6} "
              f"{recv:5} {row['upd']:4} {fetch:6} {recv / intervals:10.2f} {row['ckpt']:12} "
              f"{row['deleted']:11} {row['restored']:9}")
    print(f"    {'all':6} {tot['intervals'] * INTERVAL_S:7.1f} {tot['intervals']:6.1f} "
          f"{tot['conns']:6} {tot['recv']:5} {tot['upd']:4} {tot['fetch']:6} "
          f"{tot['recv'] / tot['intervals']:10.2f} {tot['ckpt']:12} {tot['deleted']:11} "
          f"{tot['restored']:9}")
    if tot["other"]:
        print(f"    ({tot['other']} connection(s) of no known service)")
    daemon_recv = daemon_log.count("Request receive-pack")
    daemon_upload = daemon_log.count("Request upload-pack")
    print(f"  git daemon log: {daemon_recv} receive-pack, {daemon_upload} upload-pack requests "
          f"(proxies: {tot['recv']}, {tot['fetch']})")
    at_done = sum(pushes_at_done.values())
    print(f"  pushes until every run was published ({t_done:.1f} s): {at_done}; "
          f"during the new pods' final SIGTERM: {tot['recv'] - at_done}")

    print("  pushes that updated refs, by what they carried (hook):")
    for family, n in collections.Counter(map(push_family, hook_pushes)).most_common():
        print(f"    {n:4}  {family}")
    refs = collections.Counter(ref_kind(*r, p["subjects"]) for p in hook_pushes for r in p["refs"])
    print("  ref updates in those pushes: " + ", ".join(f"{k} {n}" for k, n in refs.most_common()))
    unlanded = collections.Counter()
    for pod in pods:
        for conn in pod.proxy.records():
            if conn["service"] == "git-receive-pack" and not hook_push_of(conn, hook_pushes, t0):
                asked = hook_push_of(conn, attempts_logged, t0)
                unlanded["asked for " + push_family(asked) + ", not landed" if asked else
                         "no command (a listing of the refs only)"] += 1
    print(f"  receive-pack connections that updated no ref: {sum(unlanded.values())}")
    for what, n in unlanded.most_common():
        print(f"    {n:4}  {what}")
    purposes = collections.Counter(
        purpose(conn, hook_pushes, attempts_logged, t0) for pod in pods
        for conn in pod.proxy.records() if conn["service"] == "git-receive-pack")
    print(f"  receive-pack connections by purpose ({total_runs} runs):")
    for what, n in purposes.most_common():
        print(f"    {n:4}  {what} ({n / total_runs:.2f} per run)")

    pushes_per = tot["recv"] / tot["intervals"]
    ckpts_per = tot["ckpt"] / tot["intervals"]
    print(f"  pushes per pod per interval:                    {pushes_per:.2f} (goal <= {GOAL})")
    print(f"  run checkpoints landed per pod per interval:    {ckpts_per:.2f} (baseline: one "
          f"push each)")
    print(f"  pushes per finished run: {tot['recv'] / total_runs:.2f}; fetches per finished run: "
          f"{tot['fetch'] / total_runs:.2f}; fetches per pod per interval: "
          f"{tot['fetch'] / tot['intervals']:.2f}")
    naive = tot["ckpt"] + tot["restored"] + 2 * total_runs
    print(f"  naive per-run pushes (checkpoints + claims + a final and a deletion per run): "
          f"{naive}, {naive / tot['intervals']:.2f} per pod per interval")
    print(f"RATIO pushes/pod/interval = {pushes_per:.2f} (goal <= {GOAL}) "
          f"{'MET' if pushes_per <= GOAL else 'NOT MET'}")
    print(f"RATIO pushes/checkpoints = {tot['recv'] / tot['ckpt']:.3f}" if tot["ckpt"] else
          "RATIO pushes/checkpoints = n/a (no checkpoint landed)")


if __name__ == "__main__":
    sys.exit(main())
