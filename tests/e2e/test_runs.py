"""Runs, attempts, outcomes, queueing and stop (docs/serve.md "Runs and attempts", "The HTTP API")."""
import json
import signal

from inflight_testing.run_dirs import index_ids, run_params
from inflight_testing.waiting import wait_for
from conftest import script_child, write_config


def exit_code_child():
    return script_child("exit_code.py", params={
        "code": {"type": "integer", "min": 0, "max": 255},
        "signal": {"type": "integer", "min": 1, "max": 64},
    }) | {"optional": {"code": ["--code", "{code}"], "signal": ["--signal", "{signal}"]}}


def test_a_run_writes_run_params_console_log_and_its_records(serve_factory, tmp_path):
    serve = serve_factory()
    serve.wait_ready()
    run_id = serve.submit(tests=3, test_ms=10)
    status = serve.wait_status(run_id, "succeeded")
    run_dir = tmp_path / ".inflight" / "runs" / run_id
    assert status["exit_code"] == 0 and status["attempt"] == 1
    assert status["progress"]["records"] == 3
    assert index_ids(run_dir) == ["t001", "t002", "t003"]
    params = run_params(run_dir)
    assert params["version"] == 1 and params["run_id"] == run_id
    assert params["request"] == {"tests": 3, "test_ms": 10}
    assert params["argv"][1:] == ["--output", str(run_dir), "--tests", "3", "--test-ms", "10"]
    [attempt] = params["attempts"]
    assert attempt["outcome"] == "succeeded" and attempt["exit_code"] == 0
    assert attempt["signal"] is None and attempt["ended_at"]
    console = (run_dir / "console.log").read_text()
    assert console.startswith("=== inflight attempt 1")
    assert "all 3 tests done" in console


def test_exit_15_is_failed_and_not_retried(serve_factory, tmp_path):
    serve = serve_factory("--config", write_config(tmp_path / "c.json", exit_code_child()))
    serve.wait_ready()
    run_id = serve.submit(code=15)
    status = serve.wait_status(run_id, ["failed", "succeeded"])
    assert status["status"] == "failed" and status["exit_code"] == 15
    [attempt] = run_params(tmp_path / ".inflight" / "runs" / run_id)["attempts"]
    assert attempt["outcome"] == "failed" and attempt["signal"] is None


def test_death_by_a_signal_we_did_not_send_is_crashed_and_retried_up_to_max_attempts(serve_factory, tmp_path):
    serve = serve_factory("--config", write_config(tmp_path / "c.json", exit_code_child()),
                          "--max-attempts", "2")
    serve.wait_ready()
    run_id = serve.submit(signal=int(signal.SIGTERM))
    status = serve.wait_status(run_id, "failed")
    assert status["attempt"] == 2
    params = run_params(tmp_path / ".inflight" / "runs" / run_id)
    assert [a["outcome"] for a in params["attempts"]] == ["crashed", "crashed"]
    assert [a["signal"] for a in params["attempts"]] == [15, 15]
    assert params["argv"][-1] == "--resume", "the retry must resume"


def test_runs_beyond_max_concurrent_queue_and_start_in_order(serve_factory, tmp_path):
    serve = serve_factory("--max-concurrent", "2")
    serve.wait_ready()
    ids = [serve.submit(tests=2, test_ms=300 if i < 2 else 10) for i in range(4)]
    statuses = [serve.status(i)["status"] for i in ids]
    assert statuses[2:] == ["queued", "queued"], statuses
    running = wait_for(lambda: sum(serve.status(i)["status"] == "running" for i in ids[:2]) == 2 or None,
                       10, "two running")
    assert running
    for run_id in ids:
        serve.wait_status(run_id, "succeeded")
    starts = [e["run_id"] for e in serve.events() if e.get("msg") == "attempt started"]
    assert starts == ids


def test_stop_cancels_a_running_and_a_queued_run_idempotently(serve_factory, tmp_path):
    serve = serve_factory("--max-concurrent", "1")
    serve.wait_ready()
    running = serve.submit(tests=1000, test_ms=100)
    queued = serve.submit(tests=1)
    serve.wait_status(running, "running")
    stopped = serve.post(f"/api/eval/run/{queued}/stop")
    assert stopped.status == 200 and stopped.json()["status"] == "cancelled"
    assert stopped.json()["attempt"] == 0, "a cancelled queued run never starts"
    for _ in range(2):
        r = serve.post(f"/api/eval/run/{running}/stop")
        assert r.status == 200
    assert serve.wait_status(running, "cancelled")["status"] == "cancelled"
    assert serve.status(queued)["status"] == "cancelled"
    params = run_params(tmp_path / ".inflight" / "runs" / running)
    assert params["attempts"][-1]["outcome"] == "cancelled"
    assert params["final_status"] == "cancelled"


def test_env_references_are_resolved_at_spawn_and_kept_as_references(serve_factory, tmp_path):
    child = script_child("argv_echo.py") | {"env": {"EVAL_KEY": "${SECRET_FOR_CHILD}", "PLAIN": "1"}}
    serve = serve_factory("--config", write_config(tmp_path / "c.json", child),
                          env={"SECRET_FOR_CHILD": "hunter2", "INFLIGHT_API_TOKEN": "tok"})
    serve.wait_ready()
    headers = {"Authorization": "Bearer tok"}
    r = serve.post("/api/eval/run", {}, headers=headers)
    assert r.status == 202, r.body
    run_id = r.json()["id"]
    run_dir = tmp_path / ".inflight" / "runs" / run_id
    # The file exists before its first line is whole.
    argv_file = run_dir / "argv.jsonl"
    lines = wait_for(lambda: argv_file.exists() and (t := argv_file.read_text()).endswith("\n") and
                     t.splitlines(), 10, "the child to record its env")
    env = json.loads(lines[0])["env"]
    assert env["EVAL_KEY"] == "hunter2" and env["PLAIN"] == "1"
    assert not any(k.startswith("INFLIGHT_") for k in env), "supervisor secrets leaked to the child"
    text = (run_dir / "run-params.json").read_text()
    assert "${SECRET_FOR_CHILD}" in text and "hunter2" not in text
