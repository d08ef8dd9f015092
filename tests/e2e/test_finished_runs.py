"""A finished run is never run again (docs/results.md "How a finished run is released"). Its branch
deletion is part of shutdown's work, and a branch whose run is final is deleted, not resumed."""
import signal

from inflight_testing.git_servers import branches, git
from conftest import script_child, write_config


def branch_of(server, run_id):
    return f"refs/heads/inflight/pod-a/{run_id}"


def start(serve_factory, workdir, server, *args):
    workdir.mkdir(exist_ok=True)
    serve = serve_factory("--pod-name", "pod-a", "--results-repo", server.url, *server.flags,
                          *args, workdir=workdir)
    serve.wait_ready()
    return serve


def assert_never_runs_again(serve_factory, tmp_path, server, run_id):
    """A new pod on an empty disk finds nothing to resume."""
    fresh = start(serve_factory, tmp_path / "fresh", server)
    assert fresh.get(f"/api/eval/status/{run_id}").status == 404
    assert not (tmp_path / "fresh" / ".inflight" / "runs" / run_id).exists()


def wait_pushed(serve, run_id):
    serve.wait_log(lambda e: e.get("msg") == "checkpoint pushed" and e.get("run_id") == run_id, 30)


def test_a_run_that_ends_just_before_sigterm_is_not_run_again(serve_factory, tmp_path, git_daemon):
    pod_a = tmp_path / "pod-a"
    serve = start(serve_factory, pod_a, git_daemon, "--checkpoint-interval", "100ms")
    run_id = serve.submit(tests=8, test_ms=50)
    wait_pushed(serve, run_id)
    serve.wait_log(lambda e: e.get("msg") == "attempt ended" and e.get("run_id") == run_id, 30)
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=30) == 0, "".join(serve.lines)
    assert branch_of(git_daemon, run_id) not in branches(git_daemon.bare)
    assert_never_runs_again(serve_factory, tmp_path, git_daemon, run_id)


def refuse_deletions(bare, refuse=True):
    hook = bare / "hooks" / "pre-receive"
    if not refuse:
        hook.unlink()
        return
    hook.write_text("#!/bin/sh\nwhile read old new ref; do\n"
                    "  [ \"$new\" = 0000000000000000000000000000000000000000 ] && "
                    "{ echo 'deletions refused' >&2; exit 1; }\ndone\nexit 0\n")
    hook.chmod(0o755)


def test_a_branch_whose_deletion_failed_is_retried_reported_and_never_resumed(
        serve_factory, tmp_path, git_daemon):
    """The final state is pushed before the deletion, so a branch that
    survives (the remote refused the delete) is deleted by the next start
    instead of being run again; shutdown reports it (exit 1)."""
    refuse_deletions(git_daemon.bare)
    serve = start(serve_factory, tmp_path / "pod-a", git_daemon, "--checkpoint-interval", "100ms")
    run_id = serve.submit(tests=4, test_ms=50)
    serve.wait_status(run_id, "succeeded")
    serve.wait_log(lambda e: "not deleted; will retry" in e.get("msg", ""), 90)
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=30) == 1, "".join(serve.lines)
    tip = branch_of(git_daemon, run_id)
    assert '"final_status": "succeeded"' in git(git_daemon.bare, "show", f"{tip}:run-params.json")

    # A new pod on an empty disk: the branch is final, so it is not run.
    fresh = start(serve_factory, tmp_path / "fresh", git_daemon)
    assert fresh.get(f"/api/eval/status/{run_id}").status == 404
    assert not (tmp_path / "fresh" / ".inflight" / "runs" / run_id).exists()
    fresh.signal(signal.SIGTERM)
    assert fresh.wait_exit(timeout=30) == 0
    refuse_deletions(git_daemon.bare, refuse=False)
    again = start(serve_factory, tmp_path / "again", git_daemon)
    again.wait_log(lambda e: e.get("msg") == "checkpoint branch of a finished run deleted", 30)
    assert tip not in branches(git_daemon.bare)
    assert again.get(f"/api/eval/status/{run_id}").status == 404
