"""Every bad request gets its 4xx, names the problem, starts nothing (docs/serve.md "The config file and the child templates", "The HTTP API")."""
import json
import subprocess

import pytest

from inflight_testing.http import metric
from conftest import INFLIGHT, write_config

TEMPLATE = {
    "argv": ["/usr/bin/python3", "-c", "pass", "{suite_filter}", "--output", "{output_dir}"],
    "optional": {"target": ["--target", "{target}"], "workers": ["--workers", "{workers}"],
                 "test_ids": ["--test-id", "{test_ids}"]},
    "resume_argv": ["--resume"],
    "params": {
        "suite_filter": {"type": "string", "required": True, "pattern": "^[A-Za-z0-9_./,*-]+$"},
        "target": {"type": "string", "pattern": "^[A-Za-z0-9_.-]+$"},
        "workers": {"type": "integer", "min": 1, "max": 64},
        "test_ids": {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z0-9_.:-]+$"}},
        "label": {"type": "string", "allow_dash": True},
    },
}


@pytest.fixture
def serve(serve_factory, tmp_path):
    s = serve_factory("--config", write_config(tmp_path / "config.json", TEMPLATE))
    s.wait_ready()
    return s


@pytest.mark.parametrize("body,param", [
    ({"suite_filter": "a", "bogus": 1}, "bogus"),
    ({}, "suite_filter"),
    ({"suite_filter": 7}, "suite_filter"),
    ({"suite_filter": "a", "workers": "2"}, "workers"),
    ({"suite_filter": "a", "workers": 2.5}, "workers"),
    ({"suite_filter": "a", "workers": 0}, "workers"),
    ({"suite_filter": "a", "workers": 65}, "workers"),
    ({"suite_filter": "a b"}, "suite_filter"),
    ({"suite_filter": "a;rm -rf /"}, "suite_filter"),
    ({"suite_filter": "-rf"}, "suite_filter"),
    ({"suite_filter": "a", "target": "--config=/etc/passwd"}, "target"),
    ({"suite_filter": "a", "test_ids": ["ok", "bad id"]}, "test_ids"),
    ({"suite_filter": "a", "test_ids": "t1"}, "test_ids"),
    ({"suite_filter": "a", "id": "../escape"}, "id"),
    ({"suite_filter": "a", "id": ""}, "id"),
])
def test_bad_params_are_refused_with_the_param_named(serve, tmp_path, body, param):
    r = serve.post("/api/eval/run", body)
    assert r.status == 400, r.body
    assert r.json()["error"] == "invalid_param"
    assert r.json()["message"].startswith(param + ":")
    assert serve.get("/api/eval/runs").json() == {"runs": []}
    assert not (tmp_path / ".inflight" / "runs").exists() or \
        not any((tmp_path / ".inflight" / "runs").iterdir())


def test_allow_dash_lets_a_param_begin_with_a_dash(serve):
    r = serve.post("/api/eval/run", {"suite_filter": "a", "label": "-x"})
    assert r.status == 202, r.body


@pytest.mark.parametrize("body,code", [
    (b"{not json", "invalid_json"),
    (b"[1,2]", "invalid_request"),
    (b"", "invalid_json"),
])
def test_malformed_bodies_are_refused(serve, body, code):
    r = serve.post("/api/eval/run", body)
    assert r.status == 400
    assert r.json()["error"] == code


def test_body_over_one_mib_is_413(serve):
    r = serve.post("/api/eval/run", b'{"suite_filter":"' + b"a" * (1 << 20) + b'"}')
    assert r.status == 413
    assert r.json()["error"] == "payload_too_large"
    assert serve.get("/api/eval/runs").json() == {"runs": []}


def test_unknown_routes_runs_and_methods(serve):
    assert serve.get("/nope").status == 404
    assert serve.get("/api/eval/status/missing").status == 404
    assert serve.post("/api/eval/run/missing/stop").status == 404
    assert serve.get("/api/eval/run").status == 405
    assert serve.post("/api/eval/runs").status == 405
    for r in (serve.get("/nope"), serve.get("/api/eval/run")):
        assert set(r.json()) == {"error", "message"}


def test_idempotent_submit_by_id_returns_the_same_run(serve):
    first = serve.post("/api/eval/run", {"suite_filter": "a", "id": "same-1"})
    assert first.status == 202
    again = serve.post("/api/eval/run", {"suite_filter": "other", "id": "same-1"})
    assert again.status == 200
    assert again.json()["id"] == "same-1"
    assert len(serve.get("/api/eval/runs").json()["runs"]) == 1


def test_rendered_command_keeps_hostile_looking_values_as_single_arguments(serve, tmp_path):
    run_id = serve.submit(suite_filter="evals/*.yaml", workers=2, test_ids=["a:1", "b:2"])
    params = json.loads((tmp_path / ".inflight" / "runs" / run_id / "run-params.json").read_text())
    out = str(tmp_path / ".inflight" / "runs" / run_id)
    assert params["argv"] == ["/usr/bin/python3", "-c", "pass", "evals/*.yaml", "--output", out,
                              "--workers", "2", "--test-id", "a:1", "--test-id", "b:2"]
    assert params["request"] == {"suite_filter": "evals/*.yaml", "workers": 2,
                                 "test_ids": ["a:1", "b:2"]}
    assert params["child"] == TEMPLATE


def test_api_token_guards_every_route_but_health(serve_factory, tmp_path):
    s = serve_factory("--api-token", "s3cret-token")
    s.wait_ready()
    assert s.get("/healthz").status == 200
    assert s.get("/readyz").status == 200
    assert s.get("/api/eval/runs").status == 401
    assert s.get("/metrics").status == 401
    assert s.get("/api/eval/runs", headers={"Authorization": "Bearer wrong"}).status == 401
    ok = s.get("/api/eval/runs", headers={"Authorization": "Bearer s3cret-token"})
    assert ok.status == 200
    assert not any("s3cret-token" in line for line in s.lines)


def run_inflight(*args, cwd):
    return subprocess.run([str(INFLIGHT), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=20, env={"PATH": "/usr/bin:/bin"})


def test_public_listen_without_token_refuses_to_start(tmp_path):
    r = run_inflight("serve", "--listen", "0.0.0.0:0", cwd=tmp_path)
    assert r.returncode == 2
    assert "--api-token" in r.stderr


@pytest.mark.parametrize("child,key", [
    ({"argv": ["x"], "bogus": 1}, "child.bogus"),
    ({"argv": ["x", "{nope}"]}, "child.argv"),
    ({"argv": ["x"], "params": {"n": {"type": "float"}}}, "child.params.n.type"),
    ({"argv": ["x"], "params": {"n": {"type": "string", "pattern": "("}}}, "child.params.n.pattern"),
])
def test_bad_config_stops_serve_with_exit_2_naming_the_key(tmp_path, child, key):
    config = write_config(tmp_path / "config.json", child)
    r = run_inflight("serve", "--config", config, cwd=tmp_path)
    assert r.returncode == 2
    assert key in r.stderr


def test_bad_flags_and_env_exit_2(tmp_path):
    assert run_inflight("serve", "--grace-period", "soon", cwd=tmp_path).returncode == 2
    assert run_inflight("serve", "--no-such-flag", cwd=tmp_path).returncode == 2
    assert run_inflight("no-such-command", cwd=tmp_path).returncode == 2
    config = tmp_path / "c.json"
    config.write_text('{"unknown_key": 1}')
    r = run_inflight("serve", "--config", str(config), cwd=tmp_path)
    assert r.returncode == 2 and "unknown_key" in r.stderr


def test_help_and_version(tmp_path):
    r = run_inflight("help", cwd=tmp_path)
    assert r.returncode == 0
    for command in ("serve", "resume", "checkpoints"):
        assert command in r.stdout
    assert "checkpoint-agent" not in r.stdout, "the internal agent stays hidden"
    v = run_inflight("--version", cwd=tmp_path)
    assert v.returncode == 0 and v.stdout.startswith("inflight ")


def test_subcommand_help_shows_each_options_type_default_and_variable(tmp_path):
    r = run_inflight("serve", "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    grace = next(line for line in r.stdout.splitlines() if "--grace-period" in line)
    assert "--grace-period DURATION" in grace, grace
    assert "(default 30s" in grace and "INFLIGHT_GRACE_PERIOD" in grace, grace
    r = run_inflight("checkpoints", "list", "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "--results-repo URL" in r.stdout and "INFLIGHT_RESULTS_REPO" in r.stdout, r.stdout


def test_a_flush_window_that_leaves_no_time_to_push_exits_2_naming_both_flags(tmp_path):
    r = run_inflight("serve", "--flush-window", "30s", "--grace-period", "30s", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "--flush-window" in r.stderr and "--grace-period" in r.stderr, r.stderr
    r = run_inflight("resume", "some-run", "--flush-window", "3s", "--grace-period", "3s",
                     cwd=tmp_path)
    assert r.returncode == 2 and "--flush-window" in r.stderr, r.stderr


def test_metrics_are_prometheus_text(serve):
    body = serve.get("/metrics").body
    assert "# TYPE inflight_runs gauge" in body
    assert 'inflight_attempts_total{outcome="interrupted"} 0' in body
    assert metric(serve, "inflight_children") == 0
