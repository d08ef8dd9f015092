"""Checkpoints in git over every transport, and the shutdown push within the grace period (docs/checkpoints.md, "Runs, attempts and shutdown"). Its
timings hold a resource lock in ctest: see tests/CMakeLists.txt."""
import signal
import subprocess
import time
from collections import Counter


from inflight_testing.git_servers import branches, git
from inflight_testing.proxies import FlakyRemote
from inflight_testing.run_dirs import index_ids, run_params
from inflight_testing.waiting import wait_for
from checkpoint_pods import again_pod, interrupted_runs, show
from conftest import INFLIGHT


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
