"""A shutdown signal while serve restores: restore finishes within the grace
period and the runs it claimed are pushed back, so the next pod can take them
at once instead of waiting out another pod's fresh claim."""
import signal

from test_hostile_branches import all_tests_once, refs, run_branch


def test_sigterm_during_restore_hands_every_claimed_run_to_the_next_pod(
        serve_factory, tmp_path, git_daemon):
    ids = [f"r-{n:02d}" for n in range(20)]
    for run_id in ids:
        run_branch(git_daemon.bare, run_id)
    pod_b = tmp_path / "pod-b"
    pod_b.mkdir()
    serve = serve_factory("--pod-name", "pod-b", "--results-repo", git_daemon.url, workdir=pod_b)
    serve.signal(signal.SIGTERM)  # restore was posted before the signal handler could run
    assert serve.wait_exit(timeout=60) == 0, "".join(serve.lines)
    events = serve.events()
    assert any(e.get("msg") == "waiting for restore to finish before checkpointing" for e in events)
    assert sum(e.get("msg") == "run restored" for e in events) == len(ids)
    assert len(refs(git_daemon.bare)) == len(ids)

    pod_c = tmp_path / "pod-c"
    pod_c.mkdir()
    serve = serve_factory("--pod-name", "pod-c", "--results-repo", git_daemon.url, workdir=pod_c)
    serve.wait_ready(timeout=60)
    for run_id in ids:
        serve.wait_status(run_id, "succeeded", timeout=60)
        assert all_tests_once(pod_c / ".inflight" / "runs" / run_id)
