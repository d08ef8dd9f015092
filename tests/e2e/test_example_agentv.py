"""Issue 11 point 4: examples/agentv with the real agentv CLI (pinned by
examples/agentv/package-lock.json, installed with `npm ci` into a cache outside
the repo), its `cli` target running a local command: no model, no network.

The story: a serve runs the example's eval, is stopped part-way by SIGTERM and
pushes the partial run dir; a second serve, another pod on an empty runs dir,
restores it from the results repo, relaunches agentv with `--resume`, the run
succeeds and its branch is deleted. agentv's resume skips every test that has
a row in index.jsonl, except `execution_error` rows: those it runs again (see
the second test and examples/agentv/README.md).
"""
import json
import os
import shutil
import signal
from collections import Counter
from pathlib import Path

import pytest

from inflight_testing.run_dirs import run_params
from inflight_testing.waiting import wait_for
from inflight_testing.git_servers import branches
from npm_tools import npm_install

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agentv"
TESTS = [f"sum-{n:02d}" for n in range(1, 17)]


@pytest.fixture(scope="module")
def agentv_bin():
    # The optional dependencies are the other agents' platform binaries
    # (codex, claude, copilot: 600 MB); the cli target needs none of them.
    return npm_install(EXAMPLE, "agentv", "--omit=optional")


def example_copy(tmp_path):
    """The example as a user has it, in a folder of its own (agentv writes
    .agentv/cache.json beside the eval)."""
    copy = tmp_path / "agentv"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("node_modules", ".inflight",
                                                                  "cache.json"))
    return copy


def rows(run_dir):
    """index.jsonl's complete lines, parsed."""
    text = (run_dir / "index.jsonl").read_text() if (run_dir / "index.jsonl").exists() else ""
    return [json.loads(line) for line in text.split("\n")[:-1]]


def interrupt_and_resume(serve_factory, tmp_path, repo, bin_dir, example, interrupt_when):
    """Runs the example's eval on pod-a until `interrupt_when(rows)`, SIGTERMs
    pod-a, then lets pod-b restore the run on an empty runs dir and finish it.
    Returns (run dir on pod-b, the rows pod-a had recorded)."""
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    common = ["--config", "inflight.json", "--results-repo", repo.url]
    # Each pod its own disk: the runs dir, and the checkpoint cache beside it.
    runs_a, runs_b = tmp_path / "disk-a" / "runs", tmp_path / "disk-b" / "runs"
    first = serve_factory(*common, "--pod-name", "pod-a", "--runs-dir", str(runs_a),
                          workdir=example, env=env)
    first.wait_ready()
    r = first.post("/api/eval/run", {"child": "agentv"})
    assert r.status == 202, r.body
    run_id = r.json()["id"]
    run_a = runs_a / run_id
    wait_for(lambda: interrupt_when(rows(run_a)), 60, "agentv to record part of the tests")
    first.signal(signal.SIGTERM)
    assert first.wait_exit(60) == 0
    branch = f"refs/heads/inflight/pod-a/{run_id}"
    assert branch in branches(repo.bare)
    before = rows(run_a)
    assert run_params(run_a)["attempts"][0]["outcome"] == "interrupted"
    assert len({row["test_id"] for row in before}) < len(TESTS), "the run finished before SIGTERM"

    second = serve_factory(*common, "--pod-name", "pod-b", "--runs-dir", str(runs_b),
                           workdir=example, env=env)
    second.wait_ready()
    status = second.wait_status(run_id, ("succeeded", "failed"), timeout=180)
    run_b = runs_b / run_id
    assert status["status"] == "succeeded", (run_b / "console.log").read_text()[-3000:]
    assert status["attempt"] == 2
    params = run_params(run_b)
    assert [a["outcome"] for a in params["attempts"]] == ["interrupted", "succeeded"]
    assert params["argv"][:3] == ["agentv", "eval", "run"] and params["argv"][-1] == "--resume"
    assert f"--output {run_b} " in " ".join(params["argv"])
    wait_for(lambda: branch not in branches(repo.bare), 30, "the finished run's branch to go")
    second.signal(signal.SIGTERM)
    assert second.wait_exit(60) == 0
    return run_b, before


def test_agentv_resume_runs_each_remaining_test_once(git_daemon, serve_factory, tmp_path,
                                                     agentv_bin):
    example = example_copy(tmp_path)
    run_b, before = interrupt_and_resume(serve_factory, tmp_path, git_daemon, agentv_bin,
                                         example, lambda done: len(done) >= 3)
    after = rows(run_b)
    assert Counter(row["test_id"] for row in after) == Counter(TESTS)
    assert all(row["execution_status"] == "ok" and row["score"] == 1 for row in after)
    # The tests done before SIGTERM were skipped, not run again: their rows are
    # the first attempt's, unchanged.
    assert after[:len(before)] == before
    console = (run_b / "console.log").read_text()
    assert (f"Resume: found {len(before)} existing result(s), skipping {len(before)} completed."
            in console)
    benchmark = json.loads((run_b / "benchmark.json").read_text())
    assert sorted(benchmark["metadata"]["tests_run"]) == TESTS


FLAKY_AGENT = """#!/bin/sh
# agent.sh, except that it fails on sum-03, as an agent that crashed would,
# until the file {healed} exists: agentv records an execution_error row.
set -eu
if grep -q "What is 21 + 10?" "$1" && [ ! -e {healed} ]; then
  echo "agent crashed" >&2
  exit 3
fi
sleep 0.3
sum=$(sed -n 's/.*What is \\([0-9]*\\) + \\([0-9]*\\)?.*/\\1 + \\2/p' "$1")
echo "The answer is $(($sum))." > "$2"
"""


def test_agentv_resume_runs_execution_errors_again_and_leaves_two_rows(
        git_daemon, serve_factory, tmp_path, agentv_bin):
    """What agentv's resume does not give (examples/agentv/README.md): a test
    whose row is an execution_error is run again, its new row appended, and at
    the end agentv rewrites the old row into a copy of the new one, so that
    test has two identical rows in index.jsonl. Without retries, the tests
    that SIGTERM caught running get such rows too ("CLI exited with code
    unknown"). Every other test has one row, its first one."""
    example = example_copy(tmp_path)
    healed = tmp_path / "healed"
    (example / "agent.sh").write_text(FLAKY_AGENT.replace("{healed}", str(healed)))
    config = json.loads((example / "inflight.json").read_text())
    config["children"]["agentv"]["argv"] += ["--max-retries", "0"]
    (example / "inflight.json").write_text(json.dumps(config))

    def sum03_failed(done):
        if any(r["test_id"] == "sum-03" for r in done) and len(done) >= 4:
            healed.touch()  # from the next attempt on, sum-03 succeeds
            return True
        return False

    run_b, before = interrupt_and_resume(serve_factory, tmp_path, git_daemon, agentv_bin,
                                         example, sum03_failed)
    errored = {r["test_id"] for r in before if r["execution_status"] == "execution_error"}
    assert "sum-03" in errored
    assert all(r["error"] == "CLI exited with code unknown"
               for r in before if r["execution_status"] == "execution_error"
               and r["test_id"] != "sum-03")
    after = rows(run_b)
    assert Counter(r["test_id"] for r in after) == Counter(TESTS + sorted(errored))
    assert all(r["execution_status"] == "ok" for r in after)
    for test_id in errored:
        again = [r for r in after if r["test_id"] == test_id]
        assert again[0] == again[1]
    # Rows that were not errors are the first attempt's, where they were; an
    # error row became the copy of the test's new row.
    for i, row in enumerate(before):
        if row["test_id"] in errored:
            assert after[i]["test_id"] == row["test_id"] and after[i]["execution_status"] == "ok"
        else:
            assert after[i] == row
    console = (run_b / "console.log").read_text()
    assert (f"Resume: found {len(before)} existing result(s), "
            f"skipping {len(before) - len(errored)} completed." in console)
    # agentv's own summaries count each test once (they keep the last row).
    benchmark = json.loads((run_b / "benchmark.json").read_text())
    assert sorted(benchmark["metadata"]["tests_run"]) == TESTS
