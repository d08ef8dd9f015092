"""A restart on the same runs dir resumes interrupted runs."""
import json
import signal
from collections import Counter

from inflight_testing.git_servers import git
from inflight_testing.http import metric
from inflight_testing.run_dirs import index_ids, run_params
from inflight_testing.waiting import wait_for


def interrupt_three_runs(serve_factory, tmp_path, tests=12):
    serve = serve_factory()
    serve.wait_ready()
    ids = [serve.submit(tests=tests, test_ms=100) for _ in range(3)]
    runs = tmp_path / ".inflight" / "runs"
    wait_for(lambda: all((runs / i / "index.jsonl").exists() and len(index_ids(runs / i)) >= 2
                         for i in ids), 20, "each run to record two tests")
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit() == 0
    return ids, runs


def test_restart_resumes_every_interrupted_run_and_each_test_runs_once(serve_factory, tmp_path):
    ids, runs = interrupt_three_runs(serve_factory, tmp_path)
    for run_id in ids:
        assert run_params(runs / run_id)["attempts"][0]["outcome"] == "interrupted"
        assert 2 <= len(index_ids(runs / run_id)) < 12
    serve = serve_factory()
    serve.wait_ready()
    for run_id in ids:
        status = serve.wait_status(run_id, "succeeded")
        assert status["attempt"] == 2
        recorded = index_ids(runs / run_id)
        assert sorted(recorded) == [f"t{n:03d}" for n in range(1, 13)]
        assert max(Counter(recorded).values()) == 1
        params = run_params(runs / run_id)
        assert params["argv"][-1] == "--resume"
        assert [a["outcome"] for a in params["attempts"]] == ["interrupted", "succeeded"]
        assert (runs / run_id / "console.log").read_text().count("=== inflight attempt") == 2


def test_torn_last_line_is_dropped_before_resume(serve_factory, tmp_path):
    ids, runs = interrupt_three_runs(serve_factory, tmp_path)
    torn = runs / ids[0] / "index.jsonl"
    with torn.open("a") as f:
        f.write('{"test_id":"t999","sco')
    serve = serve_factory()
    serve.wait_ready()
    serve.wait_status(ids[0], "succeeded")
    lines = torn.read_text().splitlines()
    assert all(json.loads(line) for line in lines)
    assert len(lines) == 12


def test_run_at_max_interruptions_is_marked_failed_not_relaunched(serve_factory, tmp_path):
    """docs/serve.md "The two budgets": interruptions spend --max-interruptions, not
    --max-attempts (1 here, which they leave untouched)."""
    ids, runs = interrupt_three_runs(serve_factory, tmp_path)
    serve = serve_factory("--max-interruptions", "1", "--max-attempts", "1")
    serve.wait_ready()
    for run_id in ids:
        status = serve.status(run_id)
        assert status["status"] == "failed" and status["attempt"] == 1
        assert status["interruptions"] == 1 and status["failures"] == 0
        assert run_params(runs / run_id)["final_status"] == "failed"
    assert not any(e.get("msg") == "attempt started" for e in serve.events())
    # Out of attempts is a finish: published as failed, its branch gone.
    results = tmp_path / ".inflight" / "results.git"
    for run_id in ids:
        serve.wait_log(lambda e, r=run_id: e.get("msg") == "checkpoint branch deleted" and
                       e.get("run_id") == r, 30)
        result = json.loads(git(results, "show", f"refs/inflight-results/{run_id}:run-params.json"))
        assert result["final_status"] == "failed"
    assert metric(serve, 'inflight_runs_out_of_budget_total{budget="interruptions"}') == 3
    assert metric(serve, 'inflight_runs_out_of_budget_total{budget="attempts"}') == 0


def test_interruptions_do_not_spend_max_attempts(serve_factory, tmp_path):
    ids, _ = interrupt_three_runs(serve_factory, tmp_path)
    serve = serve_factory("--max-attempts", "1")
    serve.wait_ready()
    for run_id in ids:
        serve.wait_status(run_id, "succeeded", timeout=60)
        status = serve.status(run_id)
        assert status["attempt"] == 2 and status["interruptions"] == 1 and status["failures"] == 0


def test_readyz_is_ready_only_after_restore(serve_factory, tmp_path):
    ids, _ = interrupt_three_runs(serve_factory, tmp_path)
    serve = serve_factory()
    serve.wait_ready()
    serve.wait_log(lambda e: e.get("msg") == "ready", 10)
    restored = [e["run_id"] for e in serve.events() if e.get("msg") == "run restored"]
    ready_at = next(i for i, e in enumerate(serve.events()) if e.get("msg") == "ready")
    assert sorted(restored) == sorted(ids)
    assert all(i < ready_at for i, e in enumerate(serve.events()) if e.get("msg") == "run restored")
