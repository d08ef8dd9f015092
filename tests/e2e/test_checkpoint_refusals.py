"""Checkpoints that a server refuses: a hook that declines every push, one
ref of a batched push, a claim; a local copy that could not be pushed; a branch
force-pushed under a running run (docs/checkpoints.md)."""
import json
import signal


from inflight_testing.git_servers import branches, git
from inflight_testing.proxies import FlakyRemote
from inflight_testing.run_dirs import index_ids, run_params
from inflight_testing.waiting import wait_for
from checkpoint_pods import decline_every_push, pod_a, pushes, show


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
