"""Shutdown with stubborn, prompt and repeated signals (docs/serve.md "Shutdown")."""
import signal
import time

from inflight_testing.procfs import process_exists
from inflight_testing.run_dirs import index_ids, run_params
from inflight_testing.waiting import wait_for
from conftest import script_child, write_config


def start_stubborn(serve_factory, tmp_path, *args):
    config = write_config(tmp_path / "config.json", script_child("stubborn.py"))
    serve = serve_factory("--config", config, *args)
    serve.wait_ready()
    run_id = serve.submit()
    run_dir = tmp_path / ".inflight" / "runs" / run_id
    pids = wait_for(lambda: (run_dir / "pids").exists() and (run_dir / "pids").read_text().split(),
                    10, "the stubborn child to start")
    return serve, [int(p) for p in pids]


def test_child_ignoring_sigterm_is_killed_after_flush_window_with_its_grandchild(serve_factory, tmp_path):
    serve, (child, grandchild) = start_stubborn(serve_factory, tmp_path, "--flush-window", "1s")
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=10) == 0
    # The children's part of the shutdown; the checkpoint push after it is
    # timed by bench/shutdown_latency.py.
    stopped = [e for e in serve.events() if e.get("msg") == "children stopped"]
    assert stopped and 1.0 <= stopped[0]["seconds"] < 2.0, f"children stopped after {stopped}"
    wait_for(lambda: not process_exists(child) and not process_exists(grandchild), 5,
             "child and grandchild to be gone")
    assert any(e.get("msg", "").startswith("flush window over") for e in serve.events())


def test_second_signal_skips_the_rest_of_the_flush_window(serve_factory, tmp_path):
    # A grace period long enough that a 30 s flush window still leaves time to push.
    serve, (child, _) = start_stubborn(serve_factory, tmp_path, "--flush-window", "30s",
                                       "--grace-period", "60s")
    started = time.monotonic()
    serve.signal(signal.SIGTERM)
    serve.wait_log(lambda e: e.get("msg") == "shutdown signal", 5)
    serve.signal(signal.SIGINT)
    assert serve.wait_exit(timeout=10) == 0
    assert time.monotonic() - started < 5
    wait_for(lambda: not process_exists(child), 5, "child to be gone")


def test_signals_until_the_very_end_do_not_change_the_exit_code(serve_factory, tmp_path):
    """Found by the chaos test (double SIGTERM, ASan build): a signal that came
    after the event loop ended, while the process was tearing down, killed it
    with SIGTERM and turned exit 0 into -15. Signals are sent until it is gone."""
    serve = serve_factory("--flush-window", "5s")
    serve.wait_ready()
    serve.submit(tests=1000, test_ms=1000)
    serve.signal(signal.SIGTERM)
    while serve.proc.poll() is None:
        try:
            serve.signal(signal.SIGTERM)
        except ProcessLookupError:
            break
        time.sleep(0.001)
    assert serve.wait_exit(timeout=10) == 0


def test_prompt_children_end_the_flush_window_early(serve_factory, tmp_path):
    serve = serve_factory("--flush-window", "20s")
    serve.wait_ready()
    ids = [serve.submit(tests=1000, test_ms=1000) for _ in range(3)]
    for run_id in ids:
        serve.wait_status(run_id, "running")
    started = time.monotonic()
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=25) == 0
    assert time.monotonic() - started < 3, "shutdown waited for the flush window"
    shutdown = [e for e in serve.events() if e.get("msg") == "shutdown complete"]
    assert shutdown and shutdown[0]["exit_code"] == 0


def test_sigint_is_handled_as_sigterm_and_runs_end_interrupted(serve_factory, tmp_path):
    serve = serve_factory()
    serve.wait_ready()
    run_id = serve.submit(tests=1000, test_ms=200)
    serve.wait_status(run_id, "running")
    run_dir = tmp_path / ".inflight" / "runs" / run_id
    wait_for(lambda: (run_dir / "index.jsonl").exists() and index_ids(run_dir), 10, "a record")
    serve.signal(signal.SIGINT)
    assert serve.wait_exit(timeout=10) == 0
    ended = [e for e in serve.events() if e.get("msg") == "attempt ended"]
    assert ended[-1]["outcome"] == "interrupted"
    assert ended[-1]["exit_code"] == 143


def test_shutdown_refuses_new_runs_and_readyz(serve_factory, tmp_path):
    serve, _ = start_stubborn(serve_factory, tmp_path, "--flush-window", "3s")
    serve.signal(signal.SIGTERM)
    serve.wait_log(lambda e: e.get("msg") == "shutdown signal", 5)
    ready = serve.get("/readyz")
    assert ready.status == 503
    refused = serve.post("/api/eval/run", {})
    assert refused.status == 503
    assert refused.json()["error"] == "shutting_down"
    assert "Retry-After" in refused.headers
    assert serve.get("/healthz").status == 200
    assert serve.wait_exit(timeout=10) == 0


def test_a_checkpoint_the_local_results_repo_cannot_write_fails_the_exit_but_fences_nothing(
        serve_factory, tmp_path):
    """A ref of the default local results repo that libgit2 cannot write (a
    lock left behind; in CI, another agent removing its directory) was taken
    for another owner's refusal: the run was fenced and never resumed. It is
    this pod's run still: exit 1, and the next start resumes it from disk."""
    serve = serve_factory()
    serve.wait_ready()
    run_id = serve.submit(tests=1000, test_ms=100)
    run_dir = tmp_path / ".inflight" / "runs" / run_id
    wait_for(lambda: (run_dir / "index.jsonl").exists() and index_ids(run_dir), 10, "a record")
    branch = serve.status(run_id)["checkpoint"]["branch"]
    lock = tmp_path / ".inflight" / "results.git" / f"refs/heads/{branch}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=15) == 1
    assert any("could not write" in e.get("error", "") for e in serve.events()), \
        "the log names the write that failed"
    params = run_params(run_dir)
    assert "handed_over" not in params, params["handed_over"]
    assert not any("another instance owns" in e.get("msg", "") for e in serve.events())

    lock.unlink()
    again = serve_factory()
    again.wait_ready()
    assert again.wait_status(run_id, "running")["attempt"] == 2
