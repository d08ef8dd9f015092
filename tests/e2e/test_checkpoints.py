"""Checkpoints in git over every transport, and the shutdown push (docs/checkpoints.md, "Runs, attempts and shutdown")."""
import json
import signal
import subprocess
import time
from datetime import datetime, timezone
from collections import Counter

import pytest

from inflight_testing.git_servers import branches, git
from inflight_testing.proxies import FlakyRemote
from inflight_testing.run_dirs import index_ids, run_params
from inflight_testing.waiting import wait_for
from conftest import INFLIGHT


def interrupted_runs(serve_factory, workdir, server, count=2, tests=12, extra=()):
    """Pod A: `count` runs interrupted part-way and checkpointed at shutdown."""
    workdir.mkdir(exist_ok=True)
    serve = serve_factory("--pod-name", "pod-a", "--results-repo", server.url, *server.flags,
                          *extra, workdir=workdir)
    serve.wait_ready()
    ids = [serve.submit(tests=tests, test_ms=100) for _ in range(count)]
    runs = workdir / ".inflight" / "runs"
    wait_for(lambda: all((runs / i / "index.jsonl").exists() and len(index_ids(runs / i)) >= 2
                         for i in ids), 30, "each run to record two tests")
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=60) == 0, "".join(serve.lines)
    return ids, runs


def show(bare, branch, path):
    return subprocess.run(["git", "-C", str(bare), "show", f"{branch}:{path}"],
                          capture_output=True, check=True).stdout


def test_full_story_over_every_transport(serve_factory, tmp_path, git_server):
    ids, runs_a = interrupted_runs(serve_factory, tmp_path / "pod-a", git_server)
    refs = branches(git_server.bare)
    assert sorted(refs) == sorted(f"refs/heads/inflight/pod-a/{i}" for i in ids)
    for run_id in ids:
        ref = f"refs/heads/inflight/pod-a/{run_id}"
        assert show(git_server.bare, ref, "index.jsonl") == (runs_a / run_id / "index.jsonl").read_bytes()
        assert show(git_server.bare, ref, "run-params.json") == (runs_a / run_id / "run-params.json").read_bytes()
        message = git(git_server.bare, "log", "-1", "--format=%B", ref)
        assert message.startswith(f"inflight checkpoint {run_id} attempt 1 (shutdown)")
        assert "Inflight-Pod: pod-a" in message and "Inflight-Attempt: 1" in message

    pod_b = tmp_path / "pod-b"
    pod_b.mkdir()
    serve = serve_factory("--pod-name", "pod-b", "--results-repo", git_server.url,
                          *git_server.flags, workdir=pod_b)
    serve.wait_ready()
    runs_b = pod_b / ".inflight" / "runs"
    for run_id in ids:
        status = serve.wait_status(run_id, "succeeded", timeout=60)
        assert status["attempt"] == 2
        assert len(status["checkpoint"]["last_commit"] or "") == 40, "the claim is shown"
        assert status["checkpoint"]["branch"] == f"inflight/pod-a/{run_id}"
        recorded = index_ids(runs_b / run_id)
        assert sorted(recorded) == [f"t{n:03d}" for n in range(1, 13)]
        assert max(Counter(recorded).values()) == 1
        assert run_params(runs_b / run_id)["argv"][-1] == "--resume"
    wait_for(lambda: branches(git_server.bare) == {}, 30, "the branches to be deleted")
    token = getattr(git_server, "token", None)
    if token:
        assert not any(token in line for line in serve.lines)


def test_refused_credentials_exit_3_quickly_without_the_token(serve_factory, tmp_path, http_git):
    started = time.monotonic()
    r = subprocess.run([str(INFLIGHT), "serve", "--listen", "127.0.0.1:0", "--results-repo",
                        http_git.url, *http_git.wrong_flags], cwd=tmp_path,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 3, r.stderr
    assert time.monotonic() - started < 10
    assert "credentials" in r.stderr
    bad_token = http_git.wrong_flags[http_git.wrong_flags.index("--git-token") + 1]
    assert bad_token not in r.stderr + r.stdout


def test_refused_ssh_key_exits_3(serve_factory, tmp_path, ssh_git):
    r = subprocess.run([str(INFLIGHT), "serve", "--listen", "127.0.0.1:0", "--results-repo",
                        ssh_git.url, *ssh_git.wrong_flags], cwd=tmp_path,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 3, r.stderr


def test_a_server_that_never_answers_leaves_serve_its_exit_inside_the_grace_period(
        serve_factory, git_daemon):
    """--git-timeout longer than the grace period: the pushes' deadline is
    the grace period less max(1 s, 5 %), and serve is gone before it ends."""
    with FlakyRemote(git_daemon.port) as remote:
        serve = serve_factory("--results-repo", remote.url("results.git"), "--git-timeout", "60s",
                              "--grace-period", "4s", "--flush-window", "1s")
        serve.wait_ready()
        run_id = serve.submit(tests=200, test_ms=100)
        serve.wait_status(run_id, "running")
        remote.set_mode("hung")
        started = time.monotonic()
        serve.signal(signal.SIGTERM)
        assert serve.wait_exit(timeout=15) == 1
        assert time.monotonic() - started < 4.0, "serve's exit overran the grace period"


def test_hung_server_at_shutdown_exits_1_within_grace_then_local_restore_pushes(
        serve_factory, tmp_path, hung_server, bare_repo):
    serve = serve_factory("--results-repo", hung_server.git_url, "--git-timeout", "1s",
                          "--grace-period", "3s", "--flush-window", "1s")
    serve.wait_ready(timeout=20)
    run_id = serve.submit(tests=200, test_ms=100)
    serve.wait_status(run_id, "running")
    started = time.monotonic()
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=15) == 1
    assert time.monotonic() - started < 4.5, "shutdown overran the grace period"

    again = serve_factory("--results-repo", bare_repo.url, *bare_repo.flags)
    again.wait_ready()
    assert again.wait_status(run_id, "running")["attempt"] == 2
    wait_for(lambda: f"refs/heads/inflight/{again_pod(again)}/{run_id}" in branches(bare_repo.bare),
             10, "the locally kept run to be pushed")


def again_pod(serve):
    return next(e["pod"] for e in serve.events() if e.get("msg") == "listening")


def pod_a(serve_factory, tmp_path, server, interval):
    """pod-a, ready, in its own work dir; its args, for a restart there."""
    workdir = tmp_path / "pod-a"
    workdir.mkdir()
    args = ("--pod-name", "pod-a", "--results-repo", server.url, "--checkpoint-interval", interval)
    serve = serve_factory(*args, workdir=workdir)
    serve.wait_ready()
    return serve, workdir, args


def decline_every_push(bare, decline=True):
    hook = bare / "hooks" / "pre-receive"
    if not decline:
        hook.unlink()
        return
    hook.write_text("#!/bin/sh\necho 'results repo is frozen' >&2\nexit 1\n")
    hook.chmod(0o755)


def pushes(serve):
    """inflight_checkpoint_pushes_total by result."""
    counts = {}
    for line in serve.get("/metrics").body.splitlines():
        if line.startswith("inflight_checkpoint_pushes_total{"):
            result = line.split('"')[1]
            counts[result] = int(float(line.split()[-1]))
    return counts


def test_a_hook_that_declines_every_push_costs_no_run(serve_factory, tmp_path, git_daemon):
    """A refusal by the server's rules is not another owner: the runs go on,
    the status and /metrics say their checkpoints fail, shutdown exits 1,
    and the next start (hook gone) finishes each run once."""
    decline_every_push(git_daemon.bare)
    serve, workdir, args = pod_a(serve_factory, tmp_path, git_daemon, "100ms")
    # 6 s each: the refused pushes back off (doubling intervals), and four of
    # them must fail while the runs still run, under ASan on a loaded machine too.
    ids = [serve.submit(tests=60, test_ms=100) for _ in range(2)]
    serve.wait_log(lambda e: "refused by the results repo's rules" in e.get("msg", ""), 30)
    wait_for(lambda: pushes(serve).get("failed", 0) >= 4, 30, "several refused pushes")
    for run_id in ids:
        status = serve.get(f"/api/eval/status/{run_id}").json()
        assert status["status"] == "running", status
        assert "hook declined" in status["checkpoint"]["error"], status
    assert pushes(serve)["fenced"] == 0
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=30) == 1
    assert branches(git_daemon.bare) == {}
    assert not any("another instance" in e.get("msg", "") for e in serve.events())

    decline_every_push(git_daemon.bare, decline=False)
    again = serve_factory(*args, workdir=workdir)
    again.wait_ready()
    for run_id in ids:
        again.wait_status(run_id, "succeeded", timeout=60)
        recorded = index_ids(workdir / ".inflight" / "runs" / run_id)
        assert sorted(recorded) == [f"t{n:03d}" for n in range(1, 61)]
        params = run_params(workdir / ".inflight" / "runs" / run_id)
        assert [a["outcome"] for a in params["attempts"]] == ["interrupted", "succeeded"]
    again.signal(signal.SIGTERM)
    assert again.wait_exit(timeout=30) == 0, "".join(again.lines)


def test_a_claim_the_server_refused_is_not_lost_and_lands_once_the_rule_is_gone(
        serve_factory, tmp_path, git_daemon):
    """A claim refused by the server's rules is not another pod's: the run is
    not started, nothing is marked stale, and a later look claims it once
    the hook is gone; every test runs once."""
    serve, _, _ = pod_a(serve_factory, tmp_path, git_daemon, "100ms")
    run_id = serve.submit(tests=30, test_ms=100)
    serve.wait_log(lambda e: e.get("msg") == "checkpoint pushed", 30)
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=30) == 0

    decline_every_push(git_daemon.bare)
    workdir = tmp_path / "pod-b"
    workdir.mkdir()
    pod_b = serve_factory("--pod-name", "pod-b", "--results-repo", git_daemon.url,
                          "--checkpoint-interval", "100ms", workdir=workdir)
    refused = pod_b.wait_log(lambda e: "hook declined" in e.get("error", "") and
                             run_id in e.get("error", ""), 30)
    assert refused["msg"] == "checkpoint not restored", refused
    assert pod_b.get(f"/api/eval/status/{run_id}").status == 404
    assert not any(e.get("msg") == "attempt started" for e in pod_b.events())
    assert not any("another instance" in e.get("msg", "") for e in pod_b.events())

    decline_every_push(git_daemon.bare, decline=False)
    pod_b.wait_log(lambda e: e.get("msg") == "run restored" and e.get("run_id") == run_id, 30)
    pod_b.wait_status(run_id, "succeeded", timeout=60)
    run_dir = workdir / ".inflight" / "runs" / run_id
    assert sorted(index_ids(run_dir)) == [f"t{n:03d}" for n in range(1, 31)]
    assert [a["outcome"] for a in run_params(run_dir)["attempts"]] == ["interrupted", "succeeded"]


def test_a_hook_that_declines_one_ref_of_a_batched_push_holds_back_that_run_only(
        serve_factory, tmp_path, git_daemon):
    # The update hook judges each ref of a push on its own (a per-branch rule).
    hook = git_daemon.bare / "hooks" / "update"
    hook.write_text("#!/bin/sh\ncase $1 in */declined) echo 'not this one' >&2; exit 1;; esac\n"
                    "exit 0\n")
    hook.chmod(0o755)
    serve = serve_factory("--pod-name", "pod-a", "--results-repo", git_daemon.url,
                          "--checkpoint-interval", "100ms")
    serve.wait_ready()
    for run_id in ("declined", "accepted"):
        serve.post("/api/eval/run", {"id": run_id, "tests": 40, "test_ms": 100})
    wait_for(lambda: "refs/heads/inflight/pod-a/accepted" in branches(git_daemon.bare), 30,
             "the accepted run's checkpoint")
    assert "refs/heads/inflight/pod-a/declined" not in branches(git_daemon.bare)
    declined = wait_for(lambda: (s := serve.status("declined"))["checkpoint"]["error"] and s, 10,
                        "the declined run's checkpoint error")
    assert declined["status"] == "running", declined
    assert "the server refused it: hook declined" in declined["checkpoint"]["error"], declined
    assert serve.status("accepted")["checkpoint"]["error"] is None
    wait_for(lambda: pushes(serve).get("failed", 0) >= 1, 10, "the refusal counted as failed")
    hook.unlink()
    wait_for(lambda: "refs/heads/inflight/pod-a/declined" in branches(git_daemon.bare), 30,
             "the declined run's checkpoint once the hook is gone")
    assert pushes(serve)["fenced"] == 0


def test_the_local_copy_of_a_pod_that_could_not_push_wins_over_its_older_branch(
        serve_factory, tmp_path, git_daemon):
    """Issue 26: the results repo is down at SIGTERM, so pod-a exits 1 with
    its run on disk and its lease kept. pod-b on the same disk leaves the run
    to pod-a while that lease lives, then resumes it from the local copy (the
    freshest), not from the older branch: no record is redone and the
    attempt stays `interrupted`."""
    workdir = tmp_path / "disk"
    workdir.mkdir()
    with FlakyRemote(git_daemon.port) as remote:
        args = ("--results-repo", remote.url("results.git"), "--checkpoint-interval", "1s",
                "--grace-period", "3s", "--flush-window", "1s")
        pod_a = serve_factory("--pod-name", "pod-a", *args, workdir=workdir)
        pod_a.wait_ready()
        run_id = pod_a.submit(tests=60, test_ms=100)
        pod_a.wait_log(lambda e: e.get("msg") == "checkpoint pushed" and
                       e.get("run_id") == run_id, 30)
        remote.set_mode("down")
        run_dir = workdir / ".inflight" / "runs" / run_id
        on_branch = len(git(git_daemon.bare, "show",
                            f"inflight/pod-a/{run_id}:index.jsonl").splitlines())
        wait_for(lambda: len(index_ids(run_dir)) >= on_branch + 3, 30, "records past the branch")
        pod_a.signal(signal.SIGTERM)
        assert pod_a.wait_exit(timeout=30) == 1
        kept = len(index_ids(run_dir))
        assert run_params(run_dir)["attempts"][-1]["outcome"] == "interrupted"

        remote.set_mode("up")
        pod_b = serve_factory("--pod-name", "pod-b", *args, workdir=workdir)
        pod_b.wait_ready()
        pod_b.wait_log(lambda e: e.get("msg") == "run held by another live instance; left to it"
                       and e.get("run_id") == run_id, 30)
        assert run_params(run_dir)["attempts"][-1]["outcome"] == "interrupted"
        assert "handed_over" not in run_params(run_dir)
        wait_for(lambda: pod_b.get(f"/api/eval/status/{run_id}").status == 200, 30,
                 "pod-b to take the run once pod-a's lease ended")
        pod_b.wait_status(run_id, "succeeded", timeout=60)
    recorded = index_ids(run_dir)
    assert sorted(recorded) == [f"t{n:03d}" for n in range(1, 61)]
    assert [a["outcome"] for a in run_params(run_dir)["attempts"]] == ["interrupted", "succeeded"]
    assert f"60 tests, {kept} already done" in (run_dir / "console.log").read_text()


def test_a_branch_force_pushed_to_a_foreign_commit_mid_run_costs_nothing(
        serve_factory, tmp_path, git_daemon):
    """Someone rewrites a run's branch by hand to a commit that is no
    checkpoint of it: not another owner. The run goes on, its next
    checkpoint lands on top of that commit (a second parent), shutdown exits
    0, and the next start resumes it with every record once."""
    serve, workdir, args = pod_a(serve_factory, tmp_path, git_daemon, "200ms")
    run_id = serve.submit(tests=60, test_ms=100)
    serve.wait_log(lambda e: e.get("msg") == "checkpoint pushed" and e.get("run_id") == run_id, 30)
    ref = f"refs/heads/inflight/pod-a/{run_id}"
    empty_tree = git(git_daemon.bare, "hash-object", "-t", "tree", "-w", "/dev/null").strip()
    foreign = git(git_daemon.bare, "commit-tree", empty_tree, "-m", "cleanup by hand").strip()
    git(git_daemon.bare, "update-ref", ref, foreign)
    rewritten = serve.wait_log(lambda e: "was rewritten" in e.get("msg", ""), 30)
    assert rewritten["level"] == "error" and rewritten["branch"] == ref, rewritten

    def below_foreign():
        """The first parent of the checkpoint whose second is the foreign commit."""
        for line in git(git_daemon.bare, "log", "--first-parent", "--format=%P", ref).split("\n"):
            parents = line.split()
            if parents[1:] == [foreign]:
                return parents[0]

    below = wait_for(below_foreign, 30, "a checkpoint on top of the foreign commit")
    # History read along first parents stays this run's.
    assert json.loads(show(git_daemon.bare, below, "run-params.json"))["run_id"] == run_id
    assert foreign not in git(git_daemon.bare, "rev-list", "--first-parent", ref)
    assert serve.get(f"/api/eval/status/{run_id}").json()["status"] == "running"
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=30) == 0

    again = serve_factory(*args, workdir=tmp_path / "pod-a")
    again.wait_ready()
    again.wait_status(run_id, "succeeded", timeout=60)
    recorded = index_ids(workdir / ".inflight" / "runs" / run_id)
    assert sorted(recorded) == [f"t{n:03d}" for n in range(1, 61)]


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
    owner = serve_factory("--pod-name", "pod-a", "--results-repo", git_daemon.url,
                          "--checkpoint-interval", "1s", "--grace-period", "2s",
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
    wait_for(lambda: all(len(index_ids(runs / i)) >= 1 for i in ids if (runs / i).exists())
             and all((runs / i).exists() for i in ids), 30, "each run to record a test")

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
