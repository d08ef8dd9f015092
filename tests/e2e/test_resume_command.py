"""`inflight resume`: manual recovery of one run in the foreground (docs/recovery.md "`inflight checkpoints`: list, show, prune")."""
import signal
import subprocess
import threading
from collections import Counter

from inflight_testing.git_servers import branches, git
from inflight_testing.run_dirs import index_ids, run_params
from inflight_testing.waiting import wait_for
from conftest import INFLIGHT
from test_checkpoints import interrupted_runs


def resume(workdir, server, *args, timeout=60):
    return subprocess.run([str(INFLIGHT), "resume", "--log-format", "json", "--pod-name", "ops",
                           "--results-repo", server.url, *server.flags, *args],
                          cwd=workdir, capture_output=True, text=True, timeout=timeout)


def test_resume_finishes_the_run_elsewhere_and_deletes_its_branch(serve_factory, tmp_path, git_daemon):
    ids, _ = interrupted_runs(serve_factory, tmp_path / "pod-a", git_daemon, count=2)
    elsewhere = tmp_path / "ops"
    elsewhere.mkdir()
    r = resume(elsewhere, git_daemon, f"inflight/pod-a/{ids[0]}")
    assert r.returncode == 0, r.stderr
    assert "all 12 tests done" in r.stdout, "the child's output is streamed"
    recorded = index_ids(elsewhere / ".inflight" / "runs" / ids[0])
    assert sorted(recorded) == [f"t{n:03d}" for n in range(1, 13)]
    assert max(Counter(recorded).values()) == 1
    assert run_params(elsewhere / ".inflight" / "runs" / ids[0])["argv"][-1] == "--resume"
    assert sorted(branches(git_daemon.bare)) == [f"refs/heads/inflight/pod-a/{ids[1]}"]


def test_restore_only_materialises_and_keeps_the_branch(serve_factory, tmp_path, git_daemon):
    ids, runs_a = interrupted_runs(serve_factory, tmp_path / "pod-a", git_daemon, count=1)
    elsewhere = tmp_path / "ops"
    elsewhere.mkdir()
    r = resume(elsewhere, git_daemon, ids[0], "--restore-only")
    assert r.returncode == 0, r.stderr
    restored = elsewhere / ".inflight" / "runs" / ids[0]
    assert (restored / "index.jsonl").read_bytes() == (runs_a / ids[0] / "index.jsonl").read_bytes()
    assert f"refs/heads/inflight/pod-a/{ids[0]}" in branches(git_daemon.bare)
    assert not any("attempt started" in line for line in r.stderr.splitlines())


def test_interrupted_resume_checkpoints_to_the_same_branch_and_a_second_resume_finishes(
        serve_factory, tmp_path, git_daemon):
    ids, _ = interrupted_runs(serve_factory, tmp_path / "pod-a", git_daemon, count=1, tests=40)
    ref = f"refs/heads/inflight/pod-a/{ids[0]}"
    before = branches(git_daemon.bare)[ref]
    first = tmp_path / "ops-1"
    first.mkdir()
    proc = subprocess.Popen([str(INFLIGHT), "resume", "--log-format", "json", "--pod-name", "ops",
                             "--results-repo", git_daemon.url, ids[0]], cwd=first,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    wait_for(lambda: any("attempt started" in line for line in lines), 20, "the attempt to start")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    after = branches(git_daemon.bare)[ref]
    assert after != before
    assert "(shutdown)" in git(git_daemon.bare, "log", "-1", "--format=%s", ref)
    assert before in git(git_daemon.bare, "rev-list", ref), "the new checkpoint continues the branch"

    second = tmp_path / "ops-2"
    second.mkdir()
    r = resume(second, git_daemon, ids[0])
    assert r.returncode == 0, r.stderr
    recorded = index_ids(second / ".inflight" / "runs" / ids[0])
    assert sorted(recorded) == [f"t{n:03d}" for n in range(1, 41)]
    assert len(run_params(second / ".inflight" / "runs" / ids[0])["attempts"]) == 3
    assert ref not in branches(git_daemon.bare)


def test_resume_of_an_unknown_run_exits_4_and_an_unreachable_remote_exits_3(tmp_path, git_daemon):
    r = resume(tmp_path, git_daemon, "no-such-run")
    assert r.returncode == 4
    assert "checkpoints list" in r.stderr
    r = subprocess.run([str(INFLIGHT), "resume", "--results-repo", "git://127.0.0.1:1/x.git",
                        "--git-timeout", "5s", "some-run"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 3, r.stderr
    assert subprocess.run([str(INFLIGHT), "resume", "bad/../id"], cwd=tmp_path,
                          capture_output=True).returncode == 2


def test_resume_leaves_a_run_whose_pod_holds_its_lease_unless_take_over(
        serve_factory, tmp_path, git_daemon):
    """A one-shot command cannot watch a lease for a term: a lease present
    holds the run, and resume exits 1 naming its pod; --take-over takes it
    (here only materialised) and fences that pod's copy."""
    workdir = tmp_path / "pod-a"
    workdir.mkdir()
    # Checkpoints at 1 s: a take-over's claim seldom races one (it claims the
    # new tip at once when it does; test_run_command forces that race).
    pod_a = serve_factory("--pod-name", "pod-a", "--results-repo", git_daemon.url,
                          "--checkpoint-interval", "1s", workdir=workdir)
    pod_a.wait_ready()
    run_id = pod_a.submit(tests=200, test_ms=50)
    pod_a.wait_log(lambda e: e.get("msg") == "checkpoint pushed" and e.get("run_id") == run_id, 30)
    ops = tmp_path / "ops"
    ops.mkdir()

    r = resume(ops, git_daemon, run_id)
    assert r.returncode == 1, r.stderr
    left = [line for line in r.stderr.splitlines() if "holds this run" in line]
    assert left and '"pod":"pod-a"' in left[0], r.stderr
    assert not (ops / ".inflight" / "runs" / run_id).exists()
    assert pod_a.status(run_id)["status"] == "running"

    r = resume(ops, git_daemon, run_id, "--take-over", "--restore-only")
    assert r.returncode == 0, r.stderr
    assert (ops / ".inflight" / "runs" / run_id / "run-params.json").exists()
    pod_a.wait_log(lambda e: e.get("run_id") == run_id and
                   "another instance owns this run" in e.get("msg", ""), 30)
    pod_a.signal(signal.SIGTERM)
    assert pod_a.wait_exit(timeout=30) == 0
