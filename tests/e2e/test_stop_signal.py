"""A template's stop_signal is what its child gets at shutdown and at a stop
(docs/serve.md "The config file and the child templates"); an attempt that ends
after our shutdown signal is interrupted, and resumed, even when it exits 0;
after a stop through the API it is cancelled (docs/serve.md "Runs and attempts")."""
import signal

import pytest

from inflight_testing.git_servers import branches
from inflight_testing.waiting import wait_for
from conftest import script_child, write_config


def pausing_child(stop_signal):
    child = script_child("exits_0_on_term.py")
    if stop_signal:
        child["stop_signal"] = stop_signal
    return child


def start(serve_factory, workdir, server, config):
    workdir.mkdir(exist_ok=True)
    serve = serve_factory("--pod-name", "pod-a", "--results-repo", server.url, "--config", config,
                          workdir=workdir)
    serve.wait_ready()
    return serve


def run_dir(workdir, run_id):
    return workdir / ".inflight" / "runs" / run_id


@pytest.mark.parametrize("stop_signal, expected", [(None, signal.SIGTERM),
                                                   ("SIGINT", signal.SIGINT)])
def test_an_attempt_exiting_0_on_the_shutdown_signal_is_interrupted_and_resumed(
        serve_factory, tmp_path, bare_repo, stop_signal, expected):
    config = write_config(tmp_path / "config.json", pausing_child(stop_signal))
    pod_a = tmp_path / "pod-a"
    serve = start(serve_factory, pod_a, bare_repo, config)
    run_id = serve.submit()
    wait_for(lambda: (run_dir(pod_a, run_id) / "index.jsonl").exists(), 15, "the first record")
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=30) == 0, "".join(serve.lines)
    assert int((run_dir(pod_a, run_id) / "signal").read_text()) == expected
    ended = [e for e in serve.events() if e.get("msg") == "attempt ended"]
    assert [(e["exit_code"], e["outcome"]) for e in ended] == [(0, "interrupted")]
    assert f"refs/heads/inflight/pod-a/{run_id}" in branches(bare_repo.bare)

    # Another pod on an empty disk resumes it; with nothing left to do, it finishes.
    pod_b = tmp_path / "pod-b"
    other = start(serve_factory, pod_b, bare_repo, config)
    other.wait_status(run_id, "succeeded")
    assert (run_dir(pod_b, run_id) / "resumed").exists()
    wait_for(lambda: f"refs/heads/inflight/pod-a/{run_id}" not in branches(bare_repo.bare), 15,
             "the finished run's branch deleted")


def test_a_stop_sends_the_stop_signal_and_an_exit_0_after_it_is_cancelled(serve_factory, tmp_path,
                                                                        bare_repo):
    config = write_config(tmp_path / "config.json", pausing_child("SIGUSR1"))
    serve = start(serve_factory, tmp_path / "pod-a", bare_repo, config)
    run_id = serve.submit()
    directory = run_dir(tmp_path / "pod-a", run_id)
    wait_for(lambda: (directory / "index.jsonl").exists(), 15, "the first record")
    assert serve.post(f"/api/eval/run/{run_id}/stop").status == 200
    status = serve.wait_status(run_id, "cancelled")
    assert status["exit_code"] == 0
    assert int((directory / "signal").read_text()) == signal.SIGUSR1
