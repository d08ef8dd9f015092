"""Templates that fit more tools (resume as another command, placeholders in
env values, exit codes that mean "retry me later") and errors a user can act
on (a child that cannot be started, /metrics as promtool reads it)."""
import json
import shutil
import subprocess

import pytest

from inflight_testing.git_servers import branches
from inflight_testing.run_dirs import run_params
from conftest import CHILDREN, INFLIGHT, PYTHON, write_config

# A child that exits 75 ("try later") until it is resumed, then 0.
EXITS_75_UNTIL_RESUMED = "import sys; sys.exit(0 if '--resume' in sys.argv else 75)"


def retrying_child(backoff="100ms", code=EXITS_75_UNTIL_RESUMED):
    return {"argv": [PYTHON, "-c", code], "resume_argv": ["--resume"],
            "retry_exit_codes": [75, 76], "retry_backoff": backoff}


def serve_at_start(tmp_path, config):
    """`serve` with `config` written as its config file; it should stop at start."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    return subprocess.run([str(INFLIGHT), "serve", "--listen", "127.0.0.1:0", "--config", str(path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=30)


def runs_dir(tmp_path):
    return tmp_path / ".inflight" / "runs"


def test_resume_argv_replaces_the_argv_of_a_resumed_attempt(serve_factory, tmp_path):
    # The first attempt crashes (a signal nobody here sent): the retry resumes
    # with another command, as inspect-ai's `eval-retry <log>`.
    child = {"argv": [PYTHON, str(CHILDREN / "exit_code.py"), "--signal", "9"],
             "resume": {"argv": [PYTHON, str(CHILDREN / "argv_echo.py"), "eval-retry",
                                 "--output", "{output_dir}", "{output_dir}/log.eval"]}}
    serve = serve_factory("--config", write_config(tmp_path / "c.json", child))
    serve.wait_ready()
    run_id = serve.submit()
    status = serve.wait_status(run_id, ["succeeded", "failed"])
    assert status["status"] == "succeeded" and status["attempt"] == 2
    run_dir = runs_dir(tmp_path) / run_id
    [record] = [json.loads(line) for line in (run_dir / "argv.jsonl").read_text().splitlines()]
    assert record["argv"] == ["eval-retry", "--output", str(run_dir), f"{run_dir}/log.eval"]
    assert run_params(run_dir)["argv"][1:] == [str(CHILDREN / "argv_echo.py"), *record["argv"]]


def test_a_misspelt_program_stops_serve_at_start_naming_it(tmp_path):
    result = serve_at_start(tmp_path, {"children": {"agentv": {"argv": ["agentv-typo", "eval"]}}})
    assert result.returncode == 2
    assert "children.agentv.argv" in result.stderr
    assert "cannot start agentv-typo: not found on PATH" in result.stderr


def test_a_missing_resume_program_stops_serve_at_start_naming_it(tmp_path):
    child = {"argv": [PYTHON, "-c", "pass"], "resume": {"argv": ["inspect-typo", "eval-retry"]}}
    result = serve_at_start(tmp_path, {"child": child})
    assert result.returncode == 2
    assert "child.resume.argv" in result.stderr and "inspect-typo" in result.stderr


def test_env_values_take_run_id_output_dir_and_attempt(serve_factory, tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_SECRET", "s3cret")
    child = {"argv": [PYTHON, str(CHILDREN / "argv_echo.py"), "--output", "{output_dir}"],
             "env": {"EVAL_DB": "{output_dir}/state.db", "EVAL_TAG": "{run_id}#{attempt}",
                     "EVAL_KEY": "${EVAL_SECRET}"}}
    serve = serve_factory("--config", write_config(tmp_path / "c.json", child))
    serve.wait_ready()
    run_id = serve.submit()
    serve.wait_status(run_id, "succeeded")
    run_dir = runs_dir(tmp_path) / run_id
    env = json.loads((run_dir / "argv.jsonl").read_text())["env"]
    assert env["EVAL_DB"] == f"{run_dir}/state.db"
    assert env["EVAL_TAG"] == f"{run_id}#1"
    assert env["EVAL_KEY"] == "s3cret"
    assert "s3cret" not in (run_dir / "run-params.json").read_text()


def test_a_param_in_an_env_value_is_refused_at_start(tmp_path):
    child = {"argv": [PYTHON, "-c", "pass"], "env": {"X": "{suite}"},
             "params": {"suite": {"type": "string"}}}
    result = serve_at_start(tmp_path, {"child": child})
    assert result.returncode == 2 and "child.env.X" in result.stderr


def test_a_retry_exit_code_defers_the_attempt_and_resumes_it_after_the_backoff(serve_factory, tmp_path):
    serve = serve_factory("--config", write_config(tmp_path / "c.json", retrying_child()))
    serve.wait_ready()
    run_id = serve.submit()
    status = serve.wait_status(run_id, ["succeeded", "failed"])
    assert status["status"] == "succeeded" and status["attempt"] == 2
    params = run_params(runs_dir(tmp_path) / run_id)
    assert [a["outcome"] for a in params["attempts"]] == ["deferred", "succeeded"]
    assert [a["exit_code"] for a in params["attempts"]] == [75, 0]
    deferred = serve.wait_log(lambda e: e.get("msg", "").startswith("run deferred"), 5)
    assert deferred["backoff"] == "100ms" and deferred["exit_code"] == 75


def test_a_deferred_run_out_of_attempts_fails_and_keeps_its_branch(serve_factory, tmp_path):
    child = retrying_child(code="import sys; sys.exit(76)")
    serve = serve_factory("--config", write_config(tmp_path / "c.json", child),
                          "--max-attempts", "3")
    serve.wait_ready()
    run_id = serve.submit()
    status = serve.wait_status(run_id, "failed")
    assert status["attempt"] == 3
    outcomes = [a["outcome"] for a in run_params(runs_dir(tmp_path) / run_id)["attempts"]]
    assert outcomes == ["deferred"] * 3
    # The backoff doubles: 100ms, then 200ms.
    backoffs = [e["backoff"] for e in serve.events() if e.get("msg", "").startswith("run deferred")]
    assert backoffs == ["100ms", "200ms"]


def test_a_run_waiting_for_its_backoff_is_checkpointed_at_shutdown_and_cancellable(serve_factory, tmp_path):
    serve = serve_factory("--config", write_config(tmp_path / "c.json", retrying_child("1h")))
    serve.wait_ready()
    waiting, cancelled = serve.submit(), serve.submit()
    for run_id in (waiting, cancelled):
        serve.wait_log(lambda e, r=run_id: e.get("msg", "").startswith("run deferred")
                       and e.get("run_id") == r, 15)
    assert serve.status(waiting)["status"] == "queued"
    assert serve.post(f"/api/eval/run/{cancelled}/stop").status == 200
    assert serve.status(cancelled)["status"] == "cancelled"
    serve.signal()
    assert serve.wait_exit() == 0
    bare = tmp_path / ".inflight" / "results.git"
    landed = [b for b in branches(bare) if b.endswith("/" + waiting)]
    assert landed, "the deferred run's checkpoint must land"
    assert not [b for b in branches(bare) if b.endswith("/" + cancelled)]
    outcomes = [a["outcome"] for a in run_params(runs_dir(tmp_path) / waiting)["attempts"]]
    assert outcomes == ["deferred"], "a run in its backoff is not started at shutdown"


def test_a_child_that_cannot_be_started_fails_with_the_reason_in_its_status(serve_factory, tmp_path):
    program = tmp_path / "eval-tool"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    serve = serve_factory("--config", write_config(tmp_path / "c.json", {"argv": [str(program)]}))
    serve.wait_ready()
    program.unlink()  # gone after serve checked it at start
    run_id = serve.submit()
    status = serve.wait_status(run_id, ["failed", "succeeded"])
    assert status["status"] == "failed" and status["exit_code"] == 127
    assert status["error"] == f"cannot start {program}: No such file or directory"
    [attempt] = run_params(runs_dir(tmp_path) / run_id)["attempts"]
    assert attempt["error"] == status["error"] and attempt["outcome"] == "failed"
    assert status["error"] in (runs_dir(tmp_path) / run_id / "console.log").read_text()


def test_metrics_pass_promtool_check_metrics(serve_factory, tmp_path):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (scripts/setup installs Debian's prometheus)")
    serve = serve_factory("--config", write_config(tmp_path / "c.json", retrying_child()))
    serve.wait_ready()
    serve.wait_status(serve.submit(), "succeeded")
    text = serve.get("/metrics").body
    assert 'inflight_attempts_total{outcome="deferred"} 1' in text
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_submit_naming_no_child_where_no_default_template_exists_is_refused(serve_factory, tmp_path):
    # A config of named templates only: a request that names none asks for
    # `default`, which this instance does not have. A 400 naming it, and serve
    # goes on serving.
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"children": {"echo": {"argv": [PYTHON, str(CHILDREN / "argv_echo.py")]}}}))
    serve = serve_factory("--config", str(config))
    serve.wait_ready()
    response = serve.post("/api/eval/run", {})
    assert response.status == 400
    assert response.json()["error"] == "invalid_param"
    assert "no template named 'default'" in response.json()["message"]
    assert "echo" in response.json()["message"]
    assert serve.get("/healthz").status == 200
