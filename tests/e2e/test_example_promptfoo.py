"""Issue 11 point 4: examples/promptfoo with the real promptfoo CLI (pinned by
examples/promptfoo/package-lock.json, installed with `npm ci` into a cache
outside the repo), its `exec:` provider running a local command: no model, no
API key, no network.

The story: a serve runs the example's eval, is stopped part-way by SIGTERM and
pushes the partial run dir, promptfoo's database (PROMPTFOO_CONFIG_DIR, set to
{output_dir}/.promptfoo by the template) included; a second serve, another
pod on an empty runs dir at the same path, restores it from the results repo,
relaunches promptfoo with `--resume`, the run succeeds and its branch is
deleted. Same path: promptfoo's resume writes to the `--output` path stored
in its database at the first attempt (examples/promptfoo/README.md).
"""
import json
import os
import shutil
import signal
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from inflight_testing.run_dirs import run_params
from inflight_testing.waiting import wait_for
from inflight_testing.git_servers import branches
from npm_tools import npm_install

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "promptfoo"
TESTS = [f"sum-{n:02d}" for n in range(1, 17)]


@pytest.fixture(scope="module")
def promptfoo_bin():
    # With its optional dependencies: promptfoo's database is libsql, whose
    # native binary is an optional, per-platform package. --ignore-scripts:
    # no browser download for playwright, no native builds.
    return npm_install(EXAMPLE, "promptfoo")


def results(run_dir):
    """results.jsonl's complete lines, parsed."""
    path = run_dir / "results.jsonl"
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.split("\n")[:-1]]


def database_rows(promptfoo_dir, tmp_path, name):
    """{result id: (eval id, test index, success)} of promptfoo's database,
    read from a copy (the database is in WAL mode)."""
    copy = tmp_path / name
    shutil.copytree(promptfoo_dir, copy, ignore=shutil.ignore_patterns("logs", "cache"))
    db = sqlite3.connect(copy / "promptfoo.db")
    try:
        return {result_id: (eval_id, test_idx, bool(success)) for result_id, eval_id, test_idx, success
                in db.execute("SELECT id, eval_id, test_idx, success FROM eval_results")}
    finally:
        db.close()


def test_promptfoo_resume_runs_each_remaining_test_once(git_daemon, serve_factory, tmp_path,
                                                        promptfoo_bin):
    example = tmp_path / "promptfoo"
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("node_modules", ".inflight"))
    env = {"PATH": f"{promptfoo_bin}:{os.environ['PATH']}"}
    disk = tmp_path / "disk"  # the runs dir, and the checkpoint cache beside it
    runs = disk / "runs"
    common = ["--config", "inflight.json", "--results-repo", git_daemon.url,
              "--runs-dir", str(runs)]

    first = serve_factory(*common, "--pod-name", "pod-a", workdir=example, env=env)
    first.wait_ready()
    r = first.post("/api/eval/run", {"child": "promptfoo"})
    assert r.status == 202, r.body
    run_id = r.json()["id"]
    run_dir = runs / run_id
    wait_for(lambda: len(results(run_dir)) >= 3, 90, "promptfoo to record three tests")
    first.signal(signal.SIGTERM)
    assert first.wait_exit(60) == 0
    branch = f"refs/heads/inflight/pod-a/{run_id}"
    assert branch in branches(git_daemon.bare)
    params = run_params(run_dir)
    assert params["attempts"][0]["outcome"] == "interrupted"
    assert params["child"]["env"]["PROMPTFOO_CONFIG_DIR"] == "{output_dir}/.promptfoo"
    assert (run_dir / ".promptfoo" / "promptfoo.db").exists(), \
        "promptfoo's database is not in the run dir: {output_dir} in env values unsupported?"
    before = results(run_dir)
    stored = database_rows(run_dir / ".promptfoo", tmp_path, "db-at-sigterm")
    assert len(stored) < len(TESTS), "the run finished before SIGTERM"
    # Each result goes to the database, promptfoo's own record, then its line
    # to results.jsonl.
    assert {row["testIdx"] for row in before} <= {test_idx for _, test_idx, _ in stored.values()}

    shutil.rmtree(disk)  # pod-b's disk is empty
    second = serve_factory(*common, "--pod-name", "pod-b", workdir=example, env=env)
    second.wait_ready()
    status = second.wait_status(run_id, ("succeeded", "failed"), timeout=180)
    assert status["status"] == "succeeded", (run_dir / "console.log").read_text()[-3000:]
    assert status["attempt"] == 2
    params = run_params(run_dir)
    assert [a["outcome"] for a in params["attempts"]] == ["interrupted", "succeeded"]
    assert params["argv"][:2] == ["promptfoo", "eval"] and params["argv"][-1] == "--resume"
    wait_for(lambda: branch not in branches(git_daemon.bare), 30, "the finished run's branch to go")
    second.signal(signal.SIGTERM)
    assert second.wait_exit(60) == 0

    console = (run_dir / "console.log").read_text()
    assert f"Resuming: skipping {len(stored)} previously completed cases" in console
    # promptfoo's database: one eval, every test exactly once; the results
    # stored before SIGTERM are still there, not run again.
    final = database_rows(run_dir / ".promptfoo", tmp_path, "db-at-end")
    assert len({eval_id for eval_id, _, _ in final.values()}) == 1
    assert sorted(test_idx for _, test_idx, _ in final.values()) == list(range(len(TESTS)))
    assert all(success for _, _, success in final.values())
    assert stored.keys() <= final.keys()
    # results.jsonl, rewritten from the database when the eval completes:
    # every test exactly once, the same results.
    after = results(run_dir)
    assert Counter(row["testCase"]["description"] for row in after) == Counter(TESTS)
    assert {row["id"] for row in after} == final.keys()
    assert all(row["success"] for row in after)
