"""Which request reaches the provider, and which recorded answer each gets
(SPEC §13, docs/models.md "Keys and tokens", "Upstreams" and "What is
replayed"): a token copied from another run's running child works for that
run alone, kept-alive
connections that the provider closed while they were idle are not used
again, a request that was sent is never sent twice, identical requests sent
at once each get their own recorded answer, an SDK's retry after a 429 is
the request whose answer is recorded, and a request body at the size limit
is answered, recorded and replayed (one over it gets 413).

The provider, the helpers and the children are test_model_journal.py's and
test_model_journal_faults.py's."""
import http.client
import json
import urllib.parse
from collections import Counter

from inflight_testing.model_provider import ModelProvider
from inflight_testing.waiting import wait_for
from test_model_journal import (KEY_ENV, journal_entries, key, mentioning, model_log,
                                openai_model, run_dir, start_pod, write_config)
from test_model_journal_faults import calls_template, write_plan

__all__ = ["key"]  # the fixture, imported for pytest to find it here


def call(name, prompt, **extra):
    return {"call": name, "prompt": prompt, **extra}


def results(serve, run_id, name="calls.json"):
    return json.loads((run_dir(serve, run_id) / name).read_text())


def two_attempts(serve_factory, bare_repo, tmp_path, key, provider, first, second, timeout=60):
    """A run whose attempt 1 makes the calls of `first` and exits 75 (a
    retry exit code), and attempt 2 those of `second`: the pod, the run id
    and what each attempt got ({call: result})."""
    write_plan(tmp_path, "plan-1", [*first, {"exit": 75}])
    write_plan(tmp_path, "plan-2", second)
    template = calls_template(tmp_path / "plan-{attempt}.plan.json")
    template["argv"] += ["--results", "calls-{attempt}.json"]
    template.update(retry_exit_codes=[75], retry_backoff="1s")
    config = write_config(tmp_path, {"openai": openai_model(provider)}, {"calls": template})
    pod = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config, env={KEY_ENV: key})
    run_id = pod.submit(child="calls")
    pod.wait_status(run_id, "succeeded", timeout=timeout)
    return pod, run_id, [results(pod, run_id, f"calls-{n}.json") for n in (1, 2)]


def test_a_connection_the_provider_closed_is_not_reused_and_a_sent_request_is_never_resent(
        serve_factory, bare_repo, tmp_path, key):
    """The provider closes a kept-alive connection after an answer (a FIN, as
    an idle timeout does, then an RST): the next call takes a new connection
    and is paid once. A request the provider read and never answered on a
    reused connection gets a 502 and is not sent again: a byte of it had
    left, so the provider may have been paid."""
    with ModelProvider(api_key=key) as provider:
        provider.close_after_next(when="fin")
        provider.close_after_next(when="rst", rst=True)
        provider.close_unanswered_next(when="unanswered")
        steps = [call("fin", "fin"), {"wait_file": "go-1"},
                 call("rst", "rst"), {"wait_file": "go-2"},
                 call("kept", "kept"), call("unanswered", "unanswered"), call("after", "after")]
        plan = write_plan(tmp_path, "connections", steps)
        config = write_config(tmp_path, {"openai": openai_model(provider)},
                              {"calls": calls_template(plan)})
        pod = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config, env={KEY_ENV: key})
        run_id = pod.submit(child="calls")
        directory = run_dir(pod, run_id)
        # Each go-ahead once the provider closed the connection (before its
        # ledger entry ends): serve has the FIN or the RST in its socket.
        for prompt, go in (("fin", "go-1"), ("rst", "go-2")):
            wait_for(lambda: any(e["prompt"] == prompt and e["ended"] for e in provider.ledger()),
                     30, f"the provider to close after {prompt}")
            (directory / go).write_text("")
        pod.wait_status(run_id, "succeeded", timeout=60)

        got = results(pod, run_id)
        assert {name: r["status"] for name, r in got.items()} == \
            {"fin": 200, "rst": 200, "kept": 200, "unanswered": 502, "after": 200}, got
        assert json.loads(got["unanswered"]["body"])["error"]["code"] == "upstream_failed"
        assert Counter(e["prompt"] for e in provider.ledger()) == \
            {"fin": 1, "rst": 1, "kept": 1, "unanswered": 1, "after": 1}
        # fin, rst and kept each on a new connection (the first two closed
        # after them), unanswered on kept's, after on a new one.
        assert provider.connections() == 4
        ledger = {e["prompt"]: e for e in provider.ledger()}
        assert ledger["unanswered"]["peer"] == ledger["kept"]["peer"]
        outcomes = [(e["status"], e["outcome"]) for e in model_log(pod, run_id)]
        assert outcomes == [(200, "ok")] * 3 + [(502, "error"), (200, "ok")], outcomes


def test_identical_requests_at_once_and_an_sdk_retry_each_get_their_own_recorded_answer(
        serve_factory, bare_repo, tmp_path, key):
    """Attempt 1 sends one prompt twice at once, and a request that gets a 429
    and is sent again with x-stainless-retry-count, then exits 75 (a retry
    exit code). Attempt 2 sends the twins again and the retried request
    once: each twin gets one of the two recorded answers (in the order the
    requests arrive), the retried request the answer its retry got, and
    nothing reaches the provider."""
    # Serial numbers in every answer's ids: the twins' answers differ.
    with ModelProvider(api_key=key, unique_ids=True) as provider:
        provider.set_delay(1.0, when="twin")  # both twins in flight at once
        provider.fail_next(429, when="flaky")
        twins = [call("twin-1", "twin", background=True),
                 call("twin-2", "twin", background=True), {"join": True}]
        pod, run_id, (first, second) = two_attempts(
            serve_factory, bare_repo, tmp_path, key, provider,
            [*twins, call("flaky", "flaky"),
             call("flaky-retry", "flaky", headers={"x-stainless-retry-count": "1"})],
            [*twins, call("flaky", "flaky")])
        assert [first[n]["status"] for n in ("twin-1", "twin-2", "flaky", "flaky-retry")] == \
            [200, 200, 429, 200], first
        ledger = provider.ledger()
        assert Counter(e["prompt"] for e in ledger) == {"twin": 2, "flaky": 2}, \
            "attempt 2 reached the provider"
        twin_calls = [e for e in ledger if e["prompt"] == "twin"]
        assert twin_calls[1]["started"] < twin_calls[0]["ended"], "the twins were not at once"
        recorded_twins = {first["twin-1"]["body"], first["twin-2"]["body"]}
        assert len(recorded_twins) == 2, "the provider's twin answers should differ"
        assert {second["twin-1"]["body"], second["twin-2"]["body"]} == recorded_twins
        assert second["flaky"]["status"] == 200
        assert second["flaky"]["body"] == first["flaky-retry"]["body"]

        ended = model_log(pod, run_id)
        assert [(e["attempt"], e["source"], e["status"]) for e in ended if e["attempt"] == 2] == \
            [(2, "journal", 200)] * 3, ended
        assert len(journal_entries(run_dir(pod, run_id))) == 3, "a 429 was recorded"


def test_a_body_at_the_size_limit_is_answered_recorded_and_replayed_and_one_over_gets_413(
        serve_factory, bare_repo, tmp_path, key):
    """A 32 MiB body (--model-max-request-bytes' default) has its identity
    computed off the event loop: it once crashed serve (a double free)."""
    limit = 32 << 20
    envelope = len(json.dumps({"model": "fake-model", "messages": [
        {"role": "user", "content": "big"}], "filler": ""}))
    with ModelProvider(api_key=key) as provider:
        big = call("big", "big", filler_bytes=limit - envelope)
        pod, run_id, (first, second) = two_attempts(
            serve_factory, bare_repo, tmp_path, key, provider,
            [big, call("over", "over", filler_bytes=limit - envelope + 1)], [big], timeout=120)
        assert (first["big"]["status"], first["over"]["status"]) == (200, 413), first
        assert second["big"]["status"] == 200 and second["big"]["body"] == first["big"]["body"]
        assert [e["prompt"] for e in provider.ledger()] == ["big"]
        assert len(provider.ledger()[0]["body"]["filler"]) == limit - envelope
        assert [(e["attempt"], e["source"]) for e in model_log(pod, run_id)] == \
            [(1, "upstream"), (2, "journal")]
        assert pod.proc.poll() is None


def chat_call(base_url, token, prompt, model_path="/v1/chat/completions"):
    """One chat call with `token`, as a process of the children's user makes it."""
    url = urllib.parse.urlsplit(base_url)
    body = json.dumps({"model": "fake-model", "messages": [{"role": "user", "content": prompt}]})
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        conn.request("POST", url.path + model_path, body=body,
                     headers={"Authorization": f"Bearer {token}",
                              "Content-Type": "application/json"})
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    finally:
        conn.close()


def test_a_token_copied_from_a_running_child_works_for_that_run_alone(
        serve_factory, bare_repo, tmp_path, key):
    """docs/models.md names this under "What remains": children run as the
    same user, so a process can copy a running child's token (here from the
    file the child wrote it to; /proc/PID/environ gives the same). Its calls
    are that run's: recorded in its journal and counted in its status, to
    the models its template names only; the key never shows."""
    with ModelProvider(api_key=key) as provider:
        plan = write_plan(tmp_path, "holder", [{"wait_file": "go"}])
        models = {"openai": openai_model(provider),
                  "anthropic": openai_model(provider, auth="x-api-key")}
        config = write_config(tmp_path, models, {"holder": calls_template(plan)})
        pod = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config, env={KEY_ENV: key})
        holder = pod.submit(child="holder")
        directory = run_dir(pod, holder)
        wait_for(lambda: (directory / "token").exists() and (directory / "token").read_text(),
                 30, "the holder's token")
        token = (directory / "token").read_text()
        listener = pod.wait_log(lambda e: e.get("msg") == "model listener", 10)["address"]
        base = f"http://{listener}/models"

        status, body = chat_call(f"{base}/openai", token, "copied")
        assert status == 200 and "answer to copied" in body and key not in body
        status, body = chat_call(f"{base}/anthropic", token, "copied-elsewhere",
                                 model_path="/v1/messages")
        assert status == 404, body
        assert [e["prompt"] for e in provider.ledger()] == ["copied"]

        (directory / "go").write_text("")
        status = pod.wait_status(holder, "succeeded", timeout=60)
        assert status["model"]["calls"] == 1 and status["model"]["replayed"] == 0
        assert len(mentioning(journal_entries(directory), "copied")) == 1
        # Once the holder's attempt ended, the copy opens nothing.
        assert chat_call(f"{base}/openai", token, "too late")[0] == 401
        assert [e["prompt"] for e in provider.ledger()] == ["copied"]
