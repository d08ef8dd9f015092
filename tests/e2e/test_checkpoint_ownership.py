"""Who owns a run: two instances resuming each run once, hostile branches
refused, a SIGKILLed pod taken over after its lease, fencing, lost claims, and
the pushes a tick, a restore and a shutdown cost (docs/checkpoints.md)."""
import json
import signal
import subprocess
import time
from datetime import datetime, timezone
from collections import Counter

import pytest

from inflight_testing.git_servers import branches, git
from inflight_testing.run_dirs import index_ids, run_params
from inflight_testing.http import metric
from inflight_testing.waiting import holds_for, wait_for
from checkpoint_pods import interrupted_runs, pushes, show


def test_two_instances_resume_each_run_exactly_once(serve_factory, tmp_path, git_daemon):
    ids, _ = interrupted_runs(serve_factory, tmp_path / "pod-a", git_daemon, count=6, tests=20,
                              extra=("--max-concurrent", "6"))
    assert len(branches(git_daemon.bare)) == 6
    pods = []
    for name in ("pod-b", "pod-c"):
        (tmp_path / name).mkdir()
        pods.append(serve_factory("--pod-name", name, "--results-repo", git_daemon.url,
                                  "--max-concurrent", "6", workdir=tmp_path / name))
    for pod in pods:
        pod.wait_ready()
        pod.wait_log(lambda e: e.get("msg") == "ready", 10)
    started = Counter()
    for pod in pods:
        for e in pod.events():
            if e.get("msg") == "attempt started":
                started[e["run_id"]] += 1
    assert sorted(started) == sorted(ids) and set(started.values()) == {1}, \
        started
    for run_id in ids:
        owner = next(p for p in pods if any(e.get("msg") == "attempt started" and
                                              e["run_id"] == run_id for e in p.events()))
        owner.wait_status(run_id, "succeeded", timeout=60)
        for other in pods:
            if other is not owner:
                assert not (other.workdir / ".inflight" / "runs" / run_id).exists()


def craft_branch(bare, ref, entries):
    """A commit whose root tree holds `entries` (mode, type, name, content or sha)."""
    lines = []
    for mode, kind, name, value in entries:
        sha = value if kind != "blob" else subprocess.run(
            ["git", "-C", str(bare), "hash-object", "-w", "--stdin"], input=value.encode(),
            capture_output=True, check=True).stdout.decode().strip()
        lines.append(f"{mode} {kind} {sha}\t{name}")
    tree = subprocess.run(["git", "-C", str(bare), "mktree", "--missing"],
                          input="\n".join(lines) + "\n", capture_output=True, text=True,
                          check=True).stdout.strip()
    commit = git(bare, "commit-tree", tree, "-m", "crafted").strip()
    git(bare, "update-ref", ref, commit)


@pytest.mark.parametrize("entry", [
    ("100644", "blob", "..", "x"),
    ("120000", "blob", "escape", "/etc/passwd"),
    ("160000", "commit", "module", "0123456789012345678901234567890123456789"),
    ("100644", "blob", ".git", "x"),
])
def test_hostile_branch_is_refused_and_the_others_restore(serve_factory, tmp_path, bare_repo, entry):
    ids, _ = interrupted_runs(serve_factory, tmp_path / "pod-a", bare_repo, count=1, tests=4)
    params = json.dumps({"version": 1, "run_id": "evil", "request": {}, "child": {"argv": ["x"]},
                         "argv": ["x"], "cwd": "/", "origin_pod": "pod-x", "created_at": "t",
                         "attempts": []})
    craft_branch(bare_repo.bare, "refs/heads/inflight/pod-x/evil",
                 [("100644", "blob", "run-params.json", params), entry])
    pod_b = tmp_path / "pod-b"
    pod_b.mkdir()
    serve = serve_factory("--results-repo", bare_repo.url, workdir=pod_b)
    serve.wait_ready()
    serve.wait_status(ids[0], "succeeded", timeout=60)
    assert serve.get("/api/eval/status/evil").status == 404
    runs = pod_b / ".inflight" / "runs"
    assert sorted(p.name for p in runs.iterdir() if not p.name.startswith(".")) == ids
    assert not (runs / "evil").exists() and not (runs / ".restore-evil").exists()
    assert any(e.get("msg") == "checkpoint not restored" and "evil" in e.get("error", "")
               for e in serve.events())


def take_over(serve_factory, tmp_path, server, run_id):
    """pod-b on a fresh disk, once it has taken run_id over (after the owner's
    lease ended)."""
    pod_b = tmp_path / "pod-b"
    pod_b.mkdir()
    taker = serve_factory("--pod-name", "pod-b", "--results-repo", server.url, workdir=pod_b)
    taker.wait_ready()
    wait_for(lambda: taker.get(f"/api/eval/status/{run_id}").status == 200, 30,
             "pod-b to take the run over once pod-a's lease is over")
    return taker


def test_sigkill_loses_at_most_one_interval(serve_factory, tmp_path, git_daemon):
    """A pod killed without a shutdown loses at most one interval of work, and
    its runs are taken over by another pod once its lease is over (3 intervals
    plus its grace period: here 3 s + 3 s)."""
    pod_a = tmp_path / "pod-a"
    pod_a.mkdir()
    serve = serve_factory("--pod-name", "pod-a", "--results-repo", git_daemon.url,
                          "--checkpoint-interval", "1s", "--grace-period", "3s",
                          "--flush-window", "1s", workdir=pod_a)
    serve.wait_ready()
    run_id = serve.submit(tests=60, test_ms=100)
    ref = f"refs/heads/inflight/pod-a/{run_id}"
    wait_for(lambda: ref in branches(git_daemon.bare) and
             len(show(git_daemon.bare, ref, "index.jsonl").splitlines()) >= 10, 30,
             "a periodic checkpoint with ten records")
    serve.proc.kill()
    serve.wait_exit()
    subprocess.run(["pkill", "-KILL", "-f", str(pod_a / ".inflight" / "runs")])
    local = len(index_ids(pod_a / ".inflight" / "runs" / run_id))
    pushed = len(show(git_daemon.bare, ref, "index.jsonl").splitlines())
    assert local - pushed <= 1000 // 100 + 1, f"lost {local - pushed} records, more than 1 s of work"

    pod_b = tmp_path / "pod-b"
    again = take_over(serve_factory, tmp_path, git_daemon, run_id)
    again.wait_status(run_id, "succeeded", timeout=60)
    recorded = index_ids(pod_b / ".inflight" / "runs" / run_id)
    assert sorted(recorded) == [f"t{n:03d}" for n in range(1, 61)]
    left = [e for e in again.events() if e.get("msg") == "run held by another live instance; left to it"]
    assert left and left[0]["pod"] == "pod-a", "the run was taken while pod-a's lease lasted"
    taken = next(e for e in again.events() if e.get("msg") == "runs taken over from other instances")
    lease_end = datetime.fromtimestamp(left[0]["until"], timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert taken["time"] >= lease_end, f"taken over at {taken['time']}, before the lease's end"
    assert "refs/heads/inflight-lease/pod-a" not in git(git_daemon.bare, "for-each-ref"), \
        "the dead pod's lease is left behind"


def test_rejected_push_fences_the_old_owner(serve_factory, tmp_path, git_daemon):
    """A pod frozen past its lease (SIGSTOP: a paused VM, a partition) finds its
    run taken when it wakes: its next push is rejected and it stops the child."""
    pod_a = tmp_path / "pod-a"
    pod_a.mkdir()
    # A short lease term (interval + grace period) for the take-over; a
    # grace period of 2 s left the last push, the lease's release, 1 s: too
    # short for a sanitized agent on a loaded machine (exit 1).
    owner = serve_factory("--pod-name", "pod-a", "--results-repo", git_daemon.url,
                          "--checkpoint-interval", "1s", "--grace-period", "5s",
                          "--flush-window", "500ms", workdir=pod_a)
    owner.wait_ready()
    # Long enough that its child, which runs on while serve is frozen, is not
    # done before serve wakes (an ASan run took 8 s to get there).
    run_id = owner.submit(tests=300, test_ms=100)
    ref = f"refs/heads/inflight/pod-a/{run_id}"
    wait_for(lambda: ref in branches(git_daemon.bare), 20, "a periodic checkpoint")
    owner.proc.send_signal(signal.SIGSTOP)

    pod_b = tmp_path / "pod-b"
    taker = take_over(serve_factory, tmp_path, git_daemon, run_id)
    taker.wait_status(run_id, "running")
    owner.proc.send_signal(signal.SIGCONT)
    owner.wait_log(lambda e: e.get("run_id") == run_id and "another instance" in e.get("msg", ""), 20)
    assert owner.wait_status(run_id, "interrupted")["status"] == "interrupted"
    assert pushes(owner).get("fenced", 0) >= 1, "a lost race counts as fenced"
    claimed_tip = branches(git_daemon.bare)[ref]
    owner.signal(signal.SIGTERM)
    assert owner.wait_exit(timeout=30) == 0
    history = git(git_daemon.bare, "log", "--format=%B", ref)
    assert "Inflight-Pod: pod-a\n" not in history.split("(claim)")[0], \
        "the fenced pod wrote to the branch after losing it"
    assert claimed_tip in git(git_daemon.bare, "rev-list", ref)
    taker.wait_status(run_id, "succeeded", timeout=60)
    recorded = index_ids(pod_b / ".inflight" / "runs" / run_id)
    assert sorted(set(recorded)) == [f"t{n:03d}" for n in range(1, 301)]
    wait_for(lambda: ref not in branches(git_daemon.bare), 30, "the finished run's branch to go")
    assert "fenced" in run_params(pod_a / ".inflight" / "runs" / run_id)["handed_over"]
    assert_never_resumed_here(serve_factory, pod_a, git_daemon, run_id)


def assert_never_resumed_here(serve_factory, workdir, server, run_id):
    """A restart on a disk whose copy was handed over neither runs nor pushes it."""
    again = serve_factory("--pod-name", "pod-a", "--results-repo", server.url, workdir=workdir)
    again.wait_ready()
    again.wait_log(lambda e: e.get("msg") == "ready", 10)
    assert again.get(f"/api/eval/status/{run_id}").status == 404
    assert not any(e.get("msg") == "attempt started" for e in again.events())
    again.signal(signal.SIGTERM)
    assert again.wait_exit(timeout=30) == 0
    assert branches(server.bare) == {}, "a handed-over copy was pushed again"


def test_a_claim_lost_to_a_live_owner_marks_the_local_copy_stale(serve_factory, tmp_path,
                                                                 git_daemon):
    ids, runs = interrupted_runs(serve_factory, tmp_path / "pod-a", git_daemon, count=1, tests=40)
    run_id = ids[0]
    pod_b = tmp_path / "pod-b"
    pod_b.mkdir()
    taker = serve_factory("--pod-name", "pod-b", "--results-repo", git_daemon.url, workdir=pod_b)
    taker.wait_ready()
    taker.wait_status(run_id, "running")
    # pod-a comes back while pod-b's claim is fresh: its own claim is refused.
    loser = serve_factory("--pod-name", "pod-a", "--results-repo", git_daemon.url,
                          workdir=tmp_path / "pod-a")
    loser.wait_log(lambda e: e.get("msg") == "ready", 30)
    assert any(e.get("run_id") == run_id and e.get("pod") == "pod-b" and
               e.get("msg") == "run held by another live instance; left to it"
               for e in loser.events()), "".join(loser.lines)
    assert loser.get(f"/api/eval/status/{run_id}").status == 404
    loser.signal(signal.SIGTERM)
    assert loser.wait_exit(timeout=30) == 0
    assert "another instance holds the run" in run_params(runs / run_id)["handed_over"]
    taker.wait_status(run_id, "succeeded", timeout=60)
    wait_for(lambda: not branches(git_daemon.bare), 30, "the finished run's branch to go")
    assert_never_resumed_here(serve_factory, tmp_path / "pod-a", git_daemon, run_id)
    assert sorted(index_ids(pod_b / ".inflight" / "runs" / run_id)) == \
        [f"t{n:03d}" for n in range(1, 41)]


def test_a_queued_run_is_checkpointed_before_it_starts(serve_factory, tmp_path, git_daemon):
    """Accepted with a 202, a run survives the loss of its pod and disk even if
    it never started (found by the chaos test: SIGKILL, then a wiped disk)."""
    pod_a = tmp_path / "pod-a"
    pod_a.mkdir()
    serve = serve_factory("--pod-name", "pod-a", "--results-repo", git_daemon.url,
                          "--max-concurrent", "1", "--checkpoint-interval", "250ms",
                          "--grace-period", "2s", "--flush-window", "500ms", workdir=pod_a)
    serve.wait_ready()
    serve.submit(tests=300, test_ms=100)
    queued = serve.submit(tests=3, test_ms=10)
    assert serve.status(queued)["status"] == "queued"
    ref = f"refs/heads/inflight/pod-a/{queued}"
    wait_for(lambda: ref in branches(git_daemon.bare), 20, "a checkpoint of the queued run")
    assert serve.status(queued)["status"] == "queued"
    serve.proc.kill()
    serve.wait_exit()
    subprocess.run(["pkill", "-KILL", "-f", str(pod_a / ".inflight" / "runs")])

    pod_b = tmp_path / "pod-b"
    again = take_over(serve_factory, tmp_path, git_daemon, queued)
    again.wait_status(queued, "succeeded", timeout=60)
    assert index_ids(pod_b / ".inflight" / "runs" / queued) == ["t001", "t002", "t003"]


def test_a_periodic_tick_is_one_push_for_every_changed_run_and_the_lease(serve_factory, tmp_path,
                                                                         git_daemon):
    """Issue 10: a pod with many runs makes one push per interval, not one per run."""
    serve = serve_factory("--pod-name", "pod-a", "--results-repo", git_daemon.url,
                          "--checkpoint-interval", "500ms")
    serve.wait_ready()
    for _ in range(6):
        serve.submit(tests=1000, test_ms=50)

    def pushed():
        return sum(e.get("msg") == "checkpoint pushed" for e in serve.events())

    def pushes():
        return git_daemon.process.output().count("Request receive-pack")

    wait_for(lambda: pushed() >= 6, 20, "every run's first checkpoint")
    before = pushed(), pushes()
    wait_for(lambda: pushed() >= before[0] + 30, 30, "five more checkpoints of each run")
    checkpoints, connections = pushed() - before[0], pushes() - before[1]
    # One push per tick carries all six runs and the lease; one per run would
    # make at least as many pushes as checkpoints.
    assert connections * 3 <= checkpoints, f"{connections} pushes for {checkpoints} checkpoints"


def test_an_idle_pod_pushes_nothing_until_it_takes_a_run(serve_factory, tmp_path, git_daemon):
    """Issue 46: the ticks of a pod that holds no run push nothing, not even
    its lease (/metrics shows none); the first push of a run it takes
    carries the lease again."""
    serve = serve_factory("--pod-name", "pod-a", "--results-repo", git_daemon.url,
                          "--checkpoint-interval", "100ms")
    serve.wait_ready()
    serve.wait_log(lambda e: e.get("msg") == "lease left to run out: this pod holds no run", 10)
    assert metric(serve, "inflight_lease_expiry_timestamp_seconds") == 0

    def pushes():
        return git_daemon.process.output().count("Request receive-pack")

    def lease():
        return git(git_daemon.bare, "rev-parse", "refs/heads/inflight-lease/pod-a")

    idle = pushes(), lease()
    holds_for(lambda: pushes() == idle[0], 1.0, "no push in ten idle intervals")
    run_id = serve.submit(tests=20, test_ms=50)
    serve.wait_log(lambda e: e.get("msg") == "checkpoint pushed" and e.get("run_id") == run_id, 20)
    assert lease() != idle[1]
    assert metric(serve, "inflight_lease_expiry_timestamp_seconds") > time.time()


def test_a_restore_is_one_listing_and_one_push_whatever_the_run_count(serve_factory, tmp_path,
                                                                      git_daemon):
    """Issue 10: one connection lists and downloads every branch, one push
    carries every claim and the lease."""
    ids, _ = interrupted_runs(serve_factory, tmp_path / "pod-a", git_daemon, count=6, tests=200,
                              extra=("--max-concurrent", "6"))

    def requests():
        log = git_daemon.process.output()
        return log.count("Request upload-pack"), log.count("Request receive-pack")

    before = requests()
    pod_b = tmp_path / "pod-b"
    pod_b.mkdir()
    taker = serve_factory("--pod-name", "pod-b", "--results-repo", git_daemon.url, workdir=pod_b)
    taker.wait_ready()
    for run_id in ids:
        assert taker.status(run_id)["attempt"] >= 1
    after = requests()
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1), \
        f"restore of {len(ids)} runs: {after[0] - before[0]} fetches, {after[1] - before[1]} pushes"
    claims = [git(git_daemon.bare, "log", "-1", "--format=%B", f"inflight/pod-a/{i}") for i in ids]
    assert all("(claim)" in c and "Inflight-Pod: pod-b\n" in c for c in claims), claims


def test_a_shutdown_is_one_push_that_also_releases_the_lease(serve_factory, tmp_path, git_daemon):
    """Issue 10: every run's shutdown checkpoint and the lease's release
    travel in one push; nothing else connects after the signal."""
    workdir = tmp_path / "pod-a"
    workdir.mkdir()
    serve = serve_factory("--pod-name", "pod-a", "--results-repo", git_daemon.url,
                          "--max-concurrent", "4", workdir=workdir)
    serve.wait_ready()
    leases = lambda: git(git_daemon.bare, "for-each-ref", "--format=%(refname)",  # noqa: E731
                         "refs/heads/inflight-lease/").split()
    assert leases() == ["refs/heads/inflight-lease/pod-a"]
    ids = [serve.submit(tests=200, test_ms=100) for _ in range(4)]
    runs = workdir / ".inflight" / "runs"
    # A run dir exists before its child writes index.jsonl: the file is what
    # is waited for (the sanitized suite once read a run dir between the two).
    wait_for(lambda: all((runs / i / "index.jsonl").exists() and len(index_ids(runs / i)) >= 1
                         for i in ids), 30, "each run to record a test")

    def requests():
        log = git_daemon.process.output()
        return log.count("Request upload-pack") + log.count("Request receive-pack")

    before = requests()
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=60) == 0, "".join(serve.lines)
    assert requests() - before == 1, "".join(serve.lines)
    assert leases() == []
    for run_id in ids:
        message = git(git_daemon.bare, "log", "-1", "--format=%B", f"inflight/pod-a/{run_id}")
        assert "(shutdown)" in message
