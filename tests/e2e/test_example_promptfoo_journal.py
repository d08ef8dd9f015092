"""examples/promptfoo/inflight-journal.json with the real promptfoo CLI
(pinned by examples/promptfoo/package-lock.json) and its openai.yaml
(provider openai:chat:gpt-4o-mini, which reads OPENAI_BASE_URL and
OPENAI_API_KEY), reaching the fake provider
(tests/support/inflight_testing/model_provider.py) through inflight's
model-call journal (docs/models.md). The provider's ledger counts what the
eval paid for.

- Across a SIGTERM with calls in flight and a second pod on a wiped disk
  (the same runs dir path: promptfoo's resume needs it,
  examples/promptfoo/README.md), each question is paid once: the calls in
  flight are read to their end within the default flush window (2 s; the
  provider takes 1 s a call) and recorded, and promptfoo's `--resume` asks
  those tests again, answered from the journal. The key is in no process of
  the attempt, the journal, the logs, the commits or the published result.
- A template that hands promptfoo a key of its own instead of `{model_key}`
  reaches no provider: every call gets 401 from inflight.
"""
import os
import shutil
import signal
import time
from collections import Counter

from example_journal import (DELAY, KEY_ENV, QUESTIONS, assert_calls_in_flight_recorded,
                             assert_child_holds_a_token, assert_key_nowhere, journal_config,
                             model_log, new_key, tool_processes, wait_published)
from inflight_testing.model_provider import ModelProvider
from inflight_testing.run_dirs import run_params
from inflight_testing.waiting import wait_for
from test_example_promptfoo import EXAMPLE, database_rows, promptfoo_bin, results  # noqa: F401

# The fake provider's answers ("answer to What is 7 + 4?") fail the sums'
# `contains` assertions, for which promptfoo exits 100; 0 lets a finished
# eval be a succeeded run.
PASS_ANYWAY = {"PROMPTFOO_FAILED_TEST_EXIT_CODE": "0"}


def example_copy(tmp_path, tests):
    """The example in a folder of its own, tests.yaml cut to its first `tests`."""
    copy = tmp_path / "promptfoo"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("node_modules", ".inflight"))
    text = (copy / "tests.yaml").read_text()
    head, *entries = text.split("\n- description: ")
    (copy / "tests.yaml").write_text(
        head + "".join("\n- description: " + e for e in entries[:tests]).rstrip("\n") + "\n")
    return copy


def start_pod(serve_factory, example, repo, name, runs, key, bin_dir):
    """`serve` of the example's inflight-journal.json, the key in its own
    environment (the config's api_key_env), the tool on its PATH."""
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", KEY_ENV: key}
    pod = serve_factory("--config", "inflight-journal.json", "--results-repo", repo.url,
                        *repo.flags, "--pod-name", name, "--runs-dir", str(runs),
                        workdir=example, env=env)
    pod.wait_ready()
    return pod


def test_promptfoo_pays_each_call_once_across_a_sigterm_and_a_wiped_disk_and_never_holds_the_key(
        serve_factory, bare_repo, tmp_path, promptfoo_bin):
    key = new_key()
    example = example_copy(tmp_path, len(QUESTIONS))
    disk = tmp_path / "disk"  # the runs dir, and the checkpoint cache beside it
    runs = disk / "runs"
    with ModelProvider(api_key=key, delay=DELAY) as provider:
        journal_config(example, provider, "promptfoo", env=PASS_ANYWAY)
        pod_a = start_pod(serve_factory, example, bare_repo, "pod-a", runs, key, promptfoo_bin)
        listener = pod_a.wait_log(lambda e: e.get("msg") == "model listener", 10)["address"]
        run_id = pod_a.submit(child="promptfoo")
        run_dir = runs / run_id
        # Two tests answered and the next two asked: SIGTERM with them in flight.
        wait_for(lambda: len(results(run_dir)) >= 2 and provider.in_flight(), 90,
                 "two answered tests and calls in flight")
        processes, node = tool_processes(pod_a, "promptfoo")
        sigterm_at = time.monotonic()
        pod_a.signal(signal.SIGTERM)
        assert pod_a.wait_exit(60) == 0
        token = assert_child_holds_a_token(processes, node, key,
                                           f"http://{listener}/models/openai/v1")

        paid_before = provider.paid()
        stored = database_rows(run_dir / ".promptfoo", tmp_path, "db-at-sigterm")
        assert run_params(run_dir)["attempts"][0]["outcome"] == "interrupted"
        assert len(stored) < paid_before < len(QUESTIONS)
        # The calls in flight at SIGTERM were read to their end and recorded,
        # although promptfoo was gone: they have no result.
        assert_calls_in_flight_recorded(provider, pod_a, run_id, run_dir, bare_repo, sigterm_at)
        journal_a = tmp_path / "journal-a"  # the first pod's run dir, kept for the key checks
        shutil.copytree(run_dir, journal_a)

        shutil.rmtree(disk)  # pod-b's disk is empty
        pod_b = start_pod(serve_factory, example, bare_repo, "pod-b", runs, key, promptfoo_bin)
        status = pod_b.wait_status(run_id, ("succeeded", "failed"), timeout=120)
        console = (run_dir / "console.log").read_text()
        assert status["status"] == "succeeded", console[-3000:]
        assert run_params(run_dir)["argv"][-1] == "--resume"
        assert f"Resuming: skipping {len(stored)} previously completed cases" in console

        # Each question paid once over both attempts; the ones in flight at
        # SIGTERM were answered from the journal.
        assert Counter(e["prompt"] for e in provider.ledger()) == Counter(QUESTIONS.values())
        assert all(e["headers"]["authorization"] == f"Bearer {key}" for e in provider.ledger())
        replayed = paid_before - len(stored)
        assert [e["source"] for e in model_log(pod_b, run_id)] == \
            ["journal"] * replayed + ["upstream"] * (len(QUESTIONS) - paid_before)
        model = status["model"]
        assert model["replayed"] == replayed
        assert model["calls"] - model["replayed"] == len(QUESTIONS)

        # promptfoo: each test once, with the provider's answer (the journal's
        # for the replayed ones).
        after = results(run_dir)
        assert Counter(r["testCase"]["description"] for r in after) == Counter(list(QUESTIONS))
        for row in after:
            question = QUESTIONS[row["testCase"]["description"]]
            assert row["response"]["output"] == f"answer to {question}", row["response"]
        final = database_rows(run_dir / ".promptfoo", tmp_path, "db-at-end")
        assert stored.keys() <= final.keys() and len(final) == len(QUESTIONS)

        wait_published(pod_b, run_id)
        pod_b.signal(signal.SIGTERM)
        assert pod_b.wait_exit(60) == 0
        assert_key_nowhere(key, token, [journal_a, run_dir], [pod_a, pod_b], bare_repo, run_id)


def test_promptfoo_with_a_token_of_its_own_never_reaches_the_provider(
        serve_factory, bare_repo, tmp_path, promptfoo_bin):
    key = new_key()
    wrong = new_key()
    example = example_copy(tmp_path, 2)
    runs = tmp_path / "disk" / "runs"
    with ModelProvider(api_key=key) as provider:
        # OPENAI_API_KEY set in the template instead of {model_key}: what a
        # child holding another key, or a stale token, sends.
        journal_config(example, provider, "promptfoo", env={KEY_ENV: wrong})
        pod = start_pod(serve_factory, example, bare_repo, "pod-a", runs, key, promptfoo_bin)
        run_id = pod.submit(child="promptfoo")
        status = pod.wait_status(run_id, ("succeeded", "failed"), timeout=120)
        run_dir = runs / run_id
        console = (run_dir / "console.log").read_text()

        assert provider.ledger() == [] and provider.refused() == [] and provider.unrouted() == []
        assert model_log(pod, run_id) == [] and status["model"]["calls"] == 0
        done = results(run_dir)
        assert sorted(r["testCase"]["description"] for r in done) == ["sum-01", "sum-02"], \
            console[-3000:]
        # promptfoo's error is inflight's refusal.
        refusal = "the token is not that of a running attempt of this instance"
        assert all(refusal in r["error"] for r in done), [r.get("error") for r in done]
        # promptfoo 0.121.20 aborts the eval at a 401 and exits 0: the run
        # succeeded, for inflight (examples/promptfoo/README.md).
        assert "Target returned HTTP 401. Aborting scan" in console, console[-3000:]
        assert status["status"] == "succeeded" and status["exit_code"] == 0
