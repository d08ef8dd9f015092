"""examples/agentv/inflight-journal.json with the real agentv CLI (pinned by
examples/agentv/package-lock.json) and its `openai` target
(.agentv/targets.yaml: base_url ${{ OPENAI_BASE_URL }}, api_key
${{ OPENAI_API_KEY }}), reaching the fake provider
(tests/support/inflight_testing/model_provider.py) through inflight's
model-call journal (docs/models.md). The provider's ledger counts what the
eval paid for.

- Across a SIGTERM with calls in flight and a second pod on an empty disk,
  each question is paid once: the calls in flight are read to their end
  within the default flush window (2 s; the provider takes 1 s a call) and
  recorded, and agentv's `--resume` runs those tests again, answered from the
  journal. The key is in no process of the attempt, the journal, the logs,
  the commits or the published result.
- A template that hands agentv a key of its own instead of `{model_key}`
  reaches no provider: every call gets 401 from inflight.
"""
import os
import signal
import time
from collections import Counter

from example_journal import (DELAY, KEY_ENV, QUESTIONS, assert_calls_in_flight_recorded,
                             assert_child_holds_a_token, assert_key_nowhere, journal_config,
                             model_log, new_key, tool_processes, wait_published)
from inflight_testing.model_provider import ModelProvider
from inflight_testing.run_dirs import run_params
from inflight_testing.waiting import wait_for
from test_example_agentv import agentv_bin, example_copy, rows  # noqa: F401 (a fixture)



def start_pod(serve_factory, example, repo, name, runs, key, bin_dir):
    """`serve` of the example's inflight-journal.json, the key in its own
    environment (the config's api_key_env), the tool on its PATH."""
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", KEY_ENV: key}
    pod = serve_factory("--config", "inflight-journal.json", "--results-repo", repo.url,
                        *repo.flags, "--pod-name", name, "--runs-dir", str(runs),
                        workdir=example, env=env)
    pod.wait_ready()
    return pod


def answer_of(run_dir, test_id):
    return (run_dir / "arithmetic" / test_id / "outputs" / "answer.md").read_text()


def test_agentv_pays_each_call_once_across_a_sigterm_and_a_wiped_disk_and_never_holds_the_key(
        serve_factory, bare_repo, tmp_path, agentv_bin):
    key = new_key()
    example = example_copy(tmp_path)
    runs_a, runs_b = tmp_path / "disk-a" / "runs", tmp_path / "disk-b" / "runs"
    with ModelProvider(api_key=key, delay=DELAY) as provider:
        journal_config(example, provider, "agentv")
        pod_a = start_pod(serve_factory, example, bare_repo, "pod-a", runs_a, key, agentv_bin)
        listener = pod_a.wait_log(lambda e: e.get("msg") == "model listener", 10)["address"]
        run_id = pod_a.submit(child="agentv", test_ids=list(QUESTIONS))
        run_a = runs_a / run_id
        # Two tests answered and the next two asked: SIGTERM with them in flight.
        wait_for(lambda: len(rows(run_a)) >= 2 and provider.in_flight(), 60,
                 "two answered tests and calls in flight")
        processes, node = tool_processes(pod_a, "agentv")
        sigterm_at = time.monotonic()
        pod_a.signal(signal.SIGTERM)
        assert pod_a.wait_exit(60) == 0
        token = assert_child_holds_a_token(processes, node, key,
                                           f"http://{listener}/models/openai/v1")

        before = rows(run_a)
        paid_before = provider.paid()
        assert run_params(run_a)["attempts"][0]["outcome"] == "interrupted"
        assert len(before) < paid_before < len(QUESTIONS)
        # The calls in flight at SIGTERM were read to their end and recorded,
        # although agentv was gone: they have no row (agentv had retries left).
        assert_calls_in_flight_recorded(provider, pod_a, run_id, run_a, bare_repo, sigterm_at)

        pod_b = start_pod(serve_factory, example, bare_repo, "pod-b", runs_b, key, agentv_bin)
        status = pod_b.wait_status(run_id, ("succeeded", "failed"), timeout=120)
        run_b = runs_b / run_id
        assert status["status"] == "succeeded", (run_b / "console.log").read_text()[-3000:]
        assert run_params(run_b)["argv"][-1] == "--resume"

        # Each question paid once over both attempts; the ones in flight at
        # SIGTERM were answered from the journal.
        assert Counter(e["prompt"] for e in provider.ledger()) == \
            Counter(QUESTIONS.values())
        assert all(e["headers"]["authorization"] == f"Bearer {key}" for e in provider.ledger())
        replayed = paid_before - len(before)
        assert [e["source"] for e in model_log(pod_b, run_id)] == \
            ["journal"] * replayed + ["upstream"] * (len(QUESTIONS) - paid_before)
        model = status["model"]
        assert model["replayed"] == replayed
        assert model["calls"] - model["replayed"] == len(QUESTIONS)

        # agentv: each test once, answered (the fake provider's answers fail
        # the sums' `contains`, a quality failure, not an error).
        after = rows(run_b)
        assert Counter(r["test_id"] for r in after) == Counter(list(QUESTIONS))
        assert after[:len(before)] == before
        assert {r["execution_status"] for r in after} == {"quality_failure"}
        # The answers of the tests the second attempt ran, those answered from
        # the journal included (agentv writes the artifacts of an attempt's
        # tests when it completes: the interrupted attempt's have none).
        done_before = {r["test_id"] for r in before}
        for test_id, question in QUESTIONS.items():
            if test_id not in done_before:
                assert answer_of(run_b, test_id).strip() == f"answer to {question}", test_id

        wait_published(pod_b, run_id)
        pod_b.signal(signal.SIGTERM)
        assert pod_b.wait_exit(60) == 0
        assert_key_nowhere(key, token, [run_a, run_b], [pod_a, pod_b], bare_repo, run_id)


def test_agentv_with_a_token_of_its_own_never_reaches_the_provider(
        serve_factory, bare_repo, tmp_path, agentv_bin):
    key = new_key()
    wrong = new_key()
    example = example_copy(tmp_path)
    runs = tmp_path / "disk" / "runs"
    with ModelProvider(api_key=key) as provider:
        # OPENAI_API_KEY set in the template instead of {model_key}: what a
        # child holding another key, or a stale token, sends. No retries, so
        # that each test asks once.
        journal_config(example, provider, "agentv", env={KEY_ENV: wrong},
                       argv=["--max-retries", "0"])
        pod = start_pod(serve_factory, example, bare_repo, "pod-a", runs, key, agentv_bin)
        run_id = pod.submit(child="agentv", test_ids=["sum-01", "sum-02"])
        status = pod.wait_status(run_id, ("succeeded", "failed"), timeout=120)
        run_dir = runs / run_id
        console = (run_dir / "console.log").read_text()

        assert provider.ledger() == [] and provider.refused() == [] and provider.unrouted() == []
        assert model_log(pod, run_id) == [] and status["model"]["calls"] == 0
        done = rows(run_dir)
        assert sorted(r["test_id"] for r in done) == ["sum-01", "sum-02"], console[-3000:]
        assert {r["execution_status"] for r in done} == {"execution_error"}, done
        # agentv's error is inflight's refusal.
        refusal = "HTTP 401 the token is not that of a running attempt of this instance"
        assert all(refusal in r["error"] for r in done), [r["error"] for r in done]
        assert status["status"] == "failed"  # agentv: every test an execution error
