"""The model-call journal (SPEC §13, docs/models.md) where things go wrong or
off the common path: an https upstream verified by its `ca_file` and its
host name; what headers reach the provider; errors (a 429, a stream reset
mid-way) never recorded nor replayed; the Responses API recorded and
replayed byte for byte; a WebSocket upgrade refused; a corrupted or torn
journal; the calls-per-run limit; a child killed mid-stream; `inflight run`
SIGTERMed and finished by `inflight resume`; and two bugs these tests
found in `inflight run` and `inflight resume`.

The provider, the helpers and what the tests take of the journal's format are
test_model_journal.py's; the children are tests/e2e/children/model_caller.py
(an eval with no resume), model_probe.py (a child trying what it should
not) and model_calls.py (the calls a test lists, some at once)."""
import json
import os
import signal
import ssl
import subprocess
import threading
from collections import Counter
from pathlib import Path

from conftest import CHILDREN, INFLIGHT, PYTHON
from inflight_testing.git_servers import make_tls_certs
from inflight_testing.model_provider import ModelProvider
from inflight_testing.procfs import descendants_of
from inflight_testing.waiting import wait_for
from test_model_journal import (INPUT_TOKENS, JOURNAL, KEY_ENV, OUTPUT_TOKENS, caller,
                                holds_stream, journal_entries, journal_records, key, mentioning,
                                metric_value, model_log, openai_model, probe_template, records,
                                run_dir, shut_down, start_pod, views_of, write_config)
from test_run_command import RunProcess

__all__ = ["key"]  # the fixture, imported for pytest to find it here

UNREADABLE = "model-call journal unreadable: nothing is replayed for this run"


def model_env_name(model):
    return "MODEL_URL_" + model.upper().replace("-", "_").replace(".", "_")


def calls_template(plan_path, models=("openai",)):
    """A template running model_calls.py with the plan at `plan_path`."""
    env = {model_env_name(m): f"{{model_url:{m}}}" for m in models}
    env["MODEL_KEY"] = "{model_key}"
    return {
        "argv": [PYTHON, str(CHILDREN / "model_calls.py"), "--output", "{output_dir}",
                 "--plan", str(plan_path)],
        "resume_argv": [],
        "env": env,
    }


def write_plan(tmp_path, name, steps):
    path = tmp_path / f"{name}.plan.json"
    path.write_text(json.dumps({"steps": steps}))
    return path


def calls_of(serve, run_id):
    return json.loads((run_dir(serve, run_id) / "calls.json").read_text())


def error_code(result):
    """The `code` of inflight's (or the provider's) JSON error body."""
    return json.loads(result["body"])["error"]["code"]


def ended_by_attempt(serve, run_id, attempt):
    return [e for e in model_log(serve, run_id) if e["attempt"] == attempt]


# --------------------------------------------------------------------------
# upstreams


def server_context(certs):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs["cert"], certs["key"])
    return context


def test_an_https_upstream_is_verified_by_its_ca_file_and_its_host_name(
        serve_factory, bare_repo, tmp_path, key):
    certs = make_tls_certs(tmp_path / "tls", host="localhost")
    other_ca = make_tls_certs(tmp_path / "other-tls", host="localhost")["ca_file"]
    # The control for by-address below: an address is verified when the cert names it.
    address_certs = make_tls_certs(tmp_path / "address-tls")
    with ModelProvider(api_key=key, ssl_context=server_context(certs)) as provider, \
            ModelProvider(api_key=key, ssl_context=server_context(address_certs)) as by_ip:
        def https(host, ca_file, port=provider.port):
            return {"upstream": f"https://{host}:{port}", "api_key_env": KEY_ENV,
                    "ca_file": str(ca_file)}
        models = {"good": https("localhost", certs["ca_file"]),
                  "other-ca": https("localhost", other_ca),
                  # The cert names localhost alone: not the address.
                  "by-address": https("127.0.0.1", certs["ca_file"]),
                  "address-cert": https("127.0.0.1", address_certs["ca_file"], by_ip.port)}
        plan = write_plan(tmp_path, "tls", [
            {"call": "good", "model": "good", "prompt": "tls-good"},
            {"call": "other-ca", "model": "other-ca", "prompt": "tls-other-ca"},
            {"call": "by-address", "model": "by-address", "prompt": "tls-by-address"},
            {"call": "good-again", "model": "good", "prompt": "tls-good-again", "stream": True},
            {"call": "address-cert", "model": "address-cert", "prompt": "tls-address-cert"},
        ])
        config = write_config(tmp_path, models, {"tls": calls_template(plan, models)})
        pod = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config, env={KEY_ENV: key})
        run_id = pod.submit(child="tls")
        pod.wait_status(run_id, "succeeded", timeout=60)

        calls = calls_of(pod, run_id)
        assert {name: c["status"] for name, c in calls.items()} == \
            {"good": 200, "other-ca": 502, "by-address": 502, "good-again": 200,
             "address-cert": 200}, calls
        assert "answer to tls-good" in calls["good"]["body"]
        assert "again" in calls["good-again"]["body"]  # the stream's words, one by one
        for name in ("other-ca", "by-address"):
            assert "certificate" in json.loads(calls[name]["body"])["error"]["message"], calls

        # Only the verified upstreams were paid, over TLS with their names in
        # SNI; the two others failed their handshakes and sent no request.
        assert [e["prompt"] for e in provider.ledger()] == ["tls-good", "tls-good-again"]
        assert [s["path"] for s in provider.seen()] == ["/v1/chat/completions"] * 2
        assert [e["prompt"] for e in by_ip.ledger()] == ["tls-address-cert"]
        assert "localhost" in provider.sni_names(), provider.sni_names()
        wait_for(lambda: len(provider.tls_failures()) >= 2, 10,
                 "the provider to see two failed handshakes")
        # The two good calls shared one kept-alive TLS connection.
        peers = {e["peer"] for e in provider.ledger()}
        assert len(peers) == 1, peers

        ended = model_log(pod, run_id)
        assert [(e["model"], e["status"], e["outcome"]) for e in ended] == [
            ("good", 200, "ok"), ("other-ca", 502, "error"), ("by-address", 502, "error"),
            ("good", 200, "ok"), ("address-cert", 200, "ok")], ended
        entries = journal_entries(run_dir(pod, run_id))
        assert sorted(e["model"] for e in entries) == ["address-cert", "good", "good"]
        assert mentioning(entries, "answer to tls-good")
        assert not mentioning(entries, "other-ca") and not mentioning(entries, "by-address")
        assert pod.status(run_id)["model"]["calls"] == 3


def test_the_provider_gets_identity_encoding_the_real_key_and_no_other_credential(
        serve_factory, bare_repo, tmp_path, key):
    extras = {"x-api-key": "$TOKEN", "api-key": "$TOKEN", "Cookie": "session=$TOKEN",
              "Proxy-Authorization": "Bearer $TOKEN", "X-Custom-Auth": "$TOKEN",
              "Accept-Encoding": "gzip, deflate, br", "OpenAI-Organization": "org-test",
              "X-Forwarded-For": "10.0.0.1", "OpenAI-Beta": "assistants=v2",
              "User-Agent": "model-calls/1", "Accept": "application/json"}
    anthropic_extras = {"Authorization": "Bearer $TOKEN", "Cookie": "session=$TOKEN",
                        "api-key": "$TOKEN", "Accept-Encoding": "gzip",
                        "anthropic-beta": "tools-2024-04-04"}
    with ModelProvider(api_key=key, delay=0.05) as provider:
        models = {"openai": openai_model(provider),
                  "anthropic": openai_model(provider, auth="x-api-key")}
        plan = write_plan(tmp_path, "headers", [
            {"call": "chat", "prompt": "headers-chat", "headers": extras},
            {"call": "stream", "prompt": "headers-stream", "stream": True, "headers": extras},
            {"call": "responses", "api": "responses", "prompt": "headers-responses",
             "headers": extras},
            {"call": "messages", "model": "anthropic", "api": "messages",
             "prompt": "headers-messages", "headers": anthropic_extras},
        ])
        config = write_config(tmp_path, models, {"calls": calls_template(plan, models)})
        pod = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config, env={KEY_ENV: key})
        run_id = pod.submit(child="calls")
        pod.wait_status(run_id, "succeeded", timeout=60)
        calls = calls_of(pod, run_id)
        assert {name: c["status"] for name, c in calls.items()} == \
            {"chat": 200, "stream": 200, "responses": 200, "messages": 200}, calls
        token = (run_dir(pod, run_id) / "token").read_text()
        assert token and token != key

        ledger = provider.ledger()
        assert [e["prompt"] for e in ledger] == \
            ["headers-chat", "headers-stream", "headers-responses", "headers-messages"]
        assert provider.refused() == [] and provider.unrouted() == []
        allowed = {"host", "content-length", "transfer-encoding", "connection", "content-type",
                   "accept", "accept-encoding", "anthropic-version", "anthropic-beta",
                   "openai-beta", "user-agent", "authorization", "x-api-key"}
        for call in ledger:
            headers = call["headers"]
            assert headers.get("accept-encoding") == "identity", headers
            assert set(headers) <= allowed, set(headers) - allowed
            assert not any(token in value for value in headers.values()), headers
            assert headers["host"] == f"127.0.0.1:{provider.port}"
        chat, stream, responses, messages = ledger
        for call in (chat, stream, responses):
            assert call["headers"]["authorization"] == f"Bearer {key}"
            assert "x-api-key" not in call["headers"]
            assert call["headers"]["openai-beta"] == "assistants=v2"
            assert call["headers"]["user-agent"] == "model-calls/1"
            assert call["headers"]["accept"] == "application/json"
        assert messages["headers"]["x-api-key"] == key
        assert "authorization" not in messages["headers"]
        assert messages["headers"]["anthropic-beta"] == "tools-2024-04-04"
        assert messages["headers"]["anthropic-version"] == "2023-06-01"


# --------------------------------------------------------------------------
# errors are never recorded, never replayed


def test_a_429_and_a_stream_reset_mid_way_are_never_recorded_and_paid_again_after_a_restart(
        serve_factory, bare_repo, tmp_path, key):
    cases = 4
    with ModelProvider(api_key=key, delay=0.2) as provider:
        provider.fail_next(429, when="case-1")
        # case-2: reset half-way, then (the child's retry) held until the
        # shutdown's flush window cuts it.
        provider.reset_mid_stream_next(when="case-2")
        provider.hang_next(when="case-2")
        template = caller(cases, stream=True, flags=["--retries", "1"])
        config = write_config(tmp_path, {"openai": openai_model(provider)}, {"caller": template})
        args = ("--flush-window", "1s")
        pod_a = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config, *args,
                          env={KEY_ENV: key})
        run_id = pod_a.submit(child="caller")
        provider.wait_for_call(lambda e: e["fault"] == "hang", 60)
        shut_down(pod_a)

        dir_a = run_dir(pod_a, run_id)
        first = records(dir_a)
        # The child saw the 429 (with its Retry-After), and its retry was answered.
        assert [(r["case"], r["tries"]) for r in first] == [(0, [200]), (1, [429, 200])], first
        assert first[1]["retry_after"] == "1"
        ended_a = model_log(pod_a, run_id)
        assert [(e["status"], e["outcome"]) for e in ended_a[:4]] == \
            [(200, "ok"), (429, "error"), (200, "ok"), (200, "error")], ended_a
        assert ended_a[4]["outcome"] == "cut", ended_a
        entries = journal_entries(dir_a)
        assert len(entries) == 2, entries
        assert mentioning(entries, "case-0") and mentioning(entries, "case-1")
        assert not mentioning(entries, "case-2"), "a reset stream was recorded"
        assert not mentioning(entries, "fake 429"), "an error was recorded"

        pod_b = start_pod(serve_factory, tmp_path, "pod-b", bare_repo, config, *args,
                          env={KEY_ENV: key})
        pod_b.wait_status(run_id, "succeeded", timeout=60)
        # case-0 and case-1 (whose 429 was not kept) come from the journal;
        # case-2 is paid a third time, its reset and its cut answer unkept.
        assert Counter(e["prompt"] for e in provider.ledger()) == \
            {"case-0": 1, "case-1": 2, "case-2": 3, "case-3": 1}
        assert [(e["source"], e["status"]) for e in model_log(pod_b, run_id)] == \
            [("journal", 200), ("journal", 200), ("upstream", 200), ("upstream", 200)]
        second = [r for r in records(run_dir(pod_b, run_id)) if r["attempt"] == 2]
        assert [(r["case"], r["tries"]) for r in second] == [(i, [200]) for i in range(cases)]
        assert all(r["answer"] == f"answer to case-{r['case']}" for r in second)
        model = pod_b.status(run_id)["model"]
        assert model["replayed"] == 2 and model["calls"] == 6


# --------------------------------------------------------------------------
# the Responses API


def test_responses_api_answers_plain_and_streamed_are_replayed_byte_for_byte(
        serve_factory, bare_repo, tmp_path, key):
    cases = 6
    # Serial numbers in every answer's ids: an answer paid again differs.
    with ModelProvider(api_key=key, delay=0.25, unique_ids=True) as provider:
        children = {"plain": caller(cases, api="responses", flags=["--raw"]),
                    "streamed": caller(cases, api="responses", stream=True, flags=["--raw"])}
        config = write_config(tmp_path, {"openai": openai_model(provider)}, children)
        pod_a = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config, env={KEY_ENV: key})
        runs = {name: pod_a.submit(child=name, id=f"responses-{name}") for name in children}
        wait_for(lambda: all(len(records(run_dir(pod_a, r))) >= 2 for r in runs.values()), 60,
                 "two answered cases in each run")
        shut_down(pod_a)
        paid_before = Counter(e["stream"] for e in provider.ledger())
        assert all(e["completed"] for e in provider.ledger())
        first = {name: {r["case"] for r in records(run_dir(pod_a, run_id))}
                 for name, run_id in runs.items()}

        pod_b = start_pod(serve_factory, tmp_path, "pod-b", bare_repo, config, env={KEY_ENV: key})
        for run_id in runs.values():
            pod_b.wait_status(run_id, "succeeded", timeout=60)
        ledger = provider.ledger()
        assert Counter((e["stream"], e["prompt"]) for e in ledger) == \
            {(stream, f"case-{i}"): 1 for stream in (False, True) for i in range(cases)}
        assert all(e["path"] == "/v1/responses" and e["completed"] for e in ledger)

        for name, run_id in runs.items():
            stream = name == "streamed"
            directory = run_dir(pod_b, run_id)
            sent = {e["prompt"]: e["sent"] for e in ledger if e["stream"] == stream}
            raw = directory / "raw"
            for i in range(cases):
                assert (raw / f"a2-case-{i}.bin").read_bytes() == sent[f"case-{i}"], (name, i)
            for i in first[name]:
                assert (raw / f"a1-case-{i}.bin").read_bytes() == sent[f"case-{i}"], (name, i)
            entries = journal_entries(directory)
            assert len(entries) == cases
            for i in range(cases):
                recorded = mentioning(entries, f"case-{i}")
                assert len(recorded) == 1, (name, i)
                if stream:
                    assert holds_stream(recorded[0], sent[f"case-{i}"]), (name, i)
                else:
                    assert any(sent[f"case-{i}"].decode() in v for v in views_of(recorded[0]))

            ended = model_log(pod_b, run_id)
            replayed = paid_before[stream]
            assert [e["source"] for e in ended] == \
                ["journal"] * replayed + ["upstream"] * (cases - replayed), (name, ended)
            # Usage read from the body, or from response.completed's.
            assert all(e["input_tokens"] == INPUT_TOKENS and
                       e["output_tokens"] == OUTPUT_TOKENS for e in ended), (name, ended)
            model = pod_b.status(run_id)["model"]
            assert model["replayed"] == replayed
            assert model["output_tokens"] == OUTPUT_TOKENS * cases
            assert model["saved_output_tokens"] == OUTPUT_TOKENS * replayed


# --------------------------------------------------------------------------
# refusals and limits


def test_a_websocket_upgrade_gets_400_and_reaches_no_provider(
        serve_factory, bare_repo, tmp_path, key):
    with ModelProvider(api_key=key) as provider:
        template = probe_template()
        template["argv"] = [*template["argv"], "--upgrade"]
        config = write_config(tmp_path, {"openai": openai_model(provider)}, {"probe": template})
        pod = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config, env={KEY_ENV: key})
        run_id = pod.submit(child="probe")
        pod.wait_status(run_id, "succeeded", timeout=60)
        probe = json.loads((run_dir(pod, run_id) / "probe.json").read_text())
        assert probe["statuses"]["own"] == 200, probe
        for name in ("upgrade", "upgrade_post"):
            assert probe["statuses"][name] == 400, probe
            error = json.loads(probe["bodies"][name])["error"]
            assert "websocket" in error["message"].lower(), error
        assert [e["prompt"] for e in provider.ledger()] == ["probe-own"]
        assert not any("upgrade" in s["headers"] or "realtime" in s["path"]
                       for s in provider.seen()), provider.seen()
        assert provider.refused() == [] and provider.unrouted() == []
        assert not mentioning(journal_entries(run_dir(pod, run_id)), "probe-upgrade")


def test_a_call_over_the_calls_per_run_limit_gets_429_and_reaches_no_provider(
        serve_factory, bare_repo, tmp_path, key):
    with ModelProvider(api_key=key, delay=0.05) as provider:
        provider.set_delay(3.0, when="slow-first")
        plan = write_plan(tmp_path, "limit", [
            {"call": "first", "prompt": "slow-first", "background": True},
            {"wait_file": "go"},
            {"call": "second", "prompt": "second"},
            {"join": True},
            {"call": "third", "prompt": "third"},
        ])
        config = write_config(tmp_path, {"openai": openai_model(provider)},
                              {"calls": calls_template(plan)})
        pod = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config,
                        "--model-max-calls-per-run", "1", env={KEY_ENV: key})
        run_id = pod.submit(child="calls")
        first = provider.wait_for_call("slow-first", 60)
        (run_dir(pod, run_id) / "go").write_text("")
        pod.wait_status(run_id, "succeeded", timeout=60)

        calls = calls_of(pod, run_id)
        assert {name: c["status"] for name, c in calls.items()} == \
            {"first": 200, "second": 429, "third": 200}, calls
        assert error_code(calls["second"]) == "too_many_calls"
        ledger = provider.ledger()
        assert [e["prompt"] for e in ledger] == ["slow-first", "third"]
        assert ledger[0]["completed"] and ledger[0]["ended"] > first["started"]
        assert [s["path"] for s in provider.seen()] == ["/v1/chat/completions"] * 2
        assert len(model_log(pod, run_id, "model call started")) == 2
        assert pod.status(run_id)["model"]["calls"] == 2


# --------------------------------------------------------------------------
# a child killed mid-stream


def child_pids(serve, script):
    """The pids of serve's descendants that run `script` under python (not
    the run shim, whose argv holds the child's)."""
    found = []
    for pid in descendants_of(serve.proc.pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0] == PYTHON.encode() and len(argv) > 1 and argv[1].endswith(script.encode()):
            found.append(pid)
    return found


def test_a_child_killed_mid_stream_ends_its_call_unrecorded_and_serve_goes_on(
        serve_factory, bare_repo, tmp_path, key):
    cases = 3
    with ModelProvider(api_key=key, delay=0.1) as provider:
        provider.set_delay(4.0, when="case-1")
        config = write_config(tmp_path, {"openai": openai_model(provider)},
                              {"caller": caller(cases, stream=True)})
        pod = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config, env={KEY_ENV: key})
        run_id = pod.submit(child="caller")
        wait_for(lambda: any(e["prompt"] == "case-1" and e["sent"] for e in provider.ledger()),
                 60, "case-1's stream to begin")
        pids = child_pids(pod, "model_caller.py")
        assert len(pids) == 1, pids
        provider.clear_delays()  # the relaunched attempt's calls go at the usual pace
        os.kill(pids[0], signal.SIGKILL)

        # The call ended (upstream too: the provider's writes stopped short).
        ended = wait_for(lambda: len(a1 := ended_by_attempt(pod, run_id, 1)) >= 2 and a1, 30,
                         "attempt 1's calls to end")
        assert [e["outcome"] for e in ended] in (["ok", "cut"], ["ok", "error"]), ended
        killed = wait_for(
            lambda: (e := next(e for e in provider.ledger() if e["prompt"] == "case-1"))["ended"]
            and e, 30, "the killed call's upstream to end")
        assert not killed["completed"]
        assert pod.proc.poll() is None and pod.get("/healthz").status == 200

        # The child was killed by a signal nobody in inflight sent: crashed,
        # relaunched at once; with no resume of its own it starts over.
        pod.wait_status(run_id, "succeeded", timeout=60)
        assert Counter(e["prompt"] for e in provider.ledger()) == \
            {"case-0": 1, "case-1": 2, "case-2": 1}
        assert [e["source"] for e in ended_by_attempt(pod, run_id, 2)] == \
            ["journal", "upstream", "upstream"]
        entries = journal_entries(run_dir(pod, run_id))
        assert len(entries) == cases
        assert [e["attempt"] for e in mentioning(entries, "case-1")] == [2]
        assert metric_value(pod, "inflight_model_calls_in_flight") == 0
        assert len(model_log(pod, run_id, "model call started")) == len(model_log(pod, run_id))


# --------------------------------------------------------------------------
# a corrupted journal


def test_a_bad_line_mid_journal_replays_nothing_and_a_torn_last_line_is_dropped(
        serve_factory, bare_repo, tmp_path, key):
    cases = 6
    with ModelProvider(api_key=key, delay=0.25) as provider:
        children = {name: caller(cases, flags=["--prompt-prefix", f"{name}-"])
                    for name in ("bad", "torn")}
        config = write_config(tmp_path, {"openai": openai_model(provider)}, children)
        pod = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config, env={KEY_ENV: key})
        runs = {name: pod.submit(child=name, id=f"journal-{name}") for name in children}
        wait_for(lambda: all(len(records(run_dir(pod, r))) >= 2 for r in runs.values()), 60,
                 "two answered cases in each run")
        shut_down(pod)
        paid_before = Counter(e["prompt"] for e in provider.ledger())

        segments = {name: run_dir(pod, run_id) / JOURNAL / "calls-000001.jsonl"
                    for name, run_id in runs.items()}
        kept = [record for _, record in journal_records(segments["bad"].read_bytes())]
        assert len(kept) >= 2, kept
        corrupted = b"".join(kept[:-1]) + b"this is not a journal line\n" + kept[-1]
        segments["bad"].write_bytes(corrupted)
        recorded_torn = len(journal_records(segments["torn"].read_bytes()))
        torn_tail = b'{"v": 2, "digest": "0123'
        with open(segments["torn"], "ab") as f:
            f.write(torn_tail)

        # The same pod on the same disk: it resumes its own runs, as they are.
        pod = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config, env={KEY_ENV: key})
        for run_id in runs.values():
            pod.wait_status(run_id, "succeeded", timeout=60)
        assert pod.proc.poll() is None and pod.get("/healthz").status == 200

        warned = [e for e in pod.events() if e.get("msg") == UNREADABLE]
        assert [e["run_id"] for e in warned] == [runs["bad"]], warned
        paid = Counter(e["prompt"] for e in provider.ledger())

        # bad: every call paid again, nothing more recorded.
        assert {source for source in
                (e["source"] for e in ended_by_attempt(pod, runs["bad"], 2))} == {"upstream"}
        assert {p: paid[p] for p in paid if p.startswith("bad-")} == \
            {f"bad-case-{i}": paid_before[f"bad-case-{i}"] + 1 for i in range(cases)}
        assert segments["bad"].read_bytes() == corrupted

        # torn: replayed, the torn tail gone, the journal whole again.
        assert [e["source"] for e in ended_by_attempt(pod, runs["torn"], 2)] == \
            ["journal"] * recorded_torn + ["upstream"] * (cases - recorded_torn)
        assert {p: paid[p] for p in paid if p.startswith("torn-")} == \
            {f"torn-case-{i}": 1 for i in range(cases)}
        assert torn_tail not in segments["torn"].read_bytes()
        assert not [e for e in pod.events() if e.get("run_id") == runs["torn"] and
                    e.get("level") in ("warn", "error")], "the torn tail was not dropped silently"
        assert len(journal_entries(run_dir(pod, runs["torn"]))) == cases


# --------------------------------------------------------------------------
# inflight run, then inflight resume


def adhoc_command(cases):
    """model_caller.py as `inflight run`'s command (--raw: its bytes kept)."""
    return [PYTHON, str(CHILDREN / "model_caller.py"), "--output", "{output_dir}",
            "--cases", str(cases), "--attempt", "{attempt}", "--raw"]


def resume(workdir, repo, run_id, config, key, timeout=90):
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFLIGHT_")}
    env[KEY_ENV] = key
    return subprocess.run(
        [str(INFLIGHT), "resume", "--log-format", "json", "--pod-name", "ops",
         "--results-repo", repo.url, *repo.flags, "--config", str(config), run_id],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)


def json_lines(text):
    events = []
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    return events


def test_inflight_run_sigtermed_three_times_then_resumed_pays_each_call_once(
        tmp_path, bare_repo, key):
    """`inflight run` SIGTERMed; the same command on a wiped disk, SIGTERMed
    again, and a third time; `inflight resume` (with the command as the
    config's template) finishes it. Each attempt's first calls come from the
    journal: a tool with no resume of its own pays once for each call."""
    cases = 10
    with ModelProvider(api_key=key, delay=0.25) as provider:
        models = {"openai": openai_model(provider)}
        models_file = tmp_path / "models.json"
        models_file.write_text(json.dumps({"models": models}))
        env = {"OPENAI_BASE_URL": "{model_url:openai}/v1", "OPENAI_API_KEY": "{model_key}"}
        # --config after the --env's: a repeatable option just before `--`
        # swallows it (see the last test of this file).
        command = [*(w for name, value in env.items() for w in ("--env", f"{name}={value}")),
                   "--config", str(models_file), "--", *adhoc_command(cases)]

        paid = [0]
        for attempt in (1, 2, 3):
            run = RunProcess(tmp_path, bare_repo, f"job-try-{attempt}", *command,
                             run_id="adhoc", extra_env={KEY_ENV: key})
            answered = paid[-1] + 2
            wait_for(lambda: sum(r["attempt"] == attempt for r in records(run.runs / "adhoc"))
                     >= answered, 60, f"{answered} answered cases in attempt {attempt}")
            run.proc.send_signal(signal.SIGTERM)
            assert run.wait() == 75, run.log.read_text()[-3000:]
            paid.append(provider.paid())
            assert paid[-2] < paid[-1] < cases
            assert len(journal_entries(run.runs / "adhoc")) == paid[-1]
            ended = [e for e in run.events() if e.get("msg") == "model call ended"]
            assert [e["source"] for e in ended] == \
                ["journal"] * paid[-2] + ["upstream"] * (paid[-1] - paid[-2]), ended

        template = {"argv": adhoc_command(cases), "env": env, "resume_argv": []}
        config = write_config(tmp_path, models, {"default": template})
        ops = tmp_path / "ops"
        ops.mkdir()
        resumed = resume(ops, bare_repo, "adhoc", config, key)
        assert resumed.returncode == 0, resumed.stderr[-3000:]

        ledger = provider.ledger()
        assert Counter(e["prompt"] for e in ledger) == {f"case-{i}": 1 for i in range(cases)}
        assert all(e["completed"] for e in ledger)
        ended = [e for e in json_lines(resumed.stderr) if e.get("msg") == "model call ended"]
        assert [(e["attempt"], e["source"]) for e in ended] == \
            [(4, "journal")] * paid[-1] + [(4, "upstream")] * (cases - paid[-1]), ended
        directory = ops / ".inflight" / "runs" / "adhoc"
        fourth = [r for r in records(directory) if r["attempt"] == 4]
        assert [r["case"] for r in fourth] == list(range(cases))
        sent = {e["prompt"]: e["sent"] for e in ledger}
        for i in range(cases):
            assert (directory / "raw" / f"a4-case-{i}.bin").read_bytes() == sent[f"case-{i}"]
        assert len(journal_entries(directory)) == cases


# `inflight resume` of a run `inflight run -- PROGRAM` started, given the
# config it took its models from (no template in it), once ran the built-in
# default template, inflight-demo-eval, in the run's dir and published the
# run as succeeded. It refuses instead (the command is the operator's to give
# again: docs/run.md "Exit codes": exit 75 means run the same command again),
# and never runs another program.
def test_inflight_resume_never_runs_another_program_than_the_runs_command(
        tmp_path, bare_repo, key):
    with ModelProvider(api_key=key, delay=0.25) as provider:
        models_file = tmp_path / "models.json"
        models_file.write_text(json.dumps({"models": {"openai": openai_model(provider)}}))
        run = RunProcess(tmp_path, bare_repo, "job-try-1",
                         "--env", "OPENAI_BASE_URL={model_url:openai}/v1",
                         "--env", "OPENAI_API_KEY={model_key}", "--config", str(models_file),
                         "--", *adhoc_command(6), run_id="adhoc", extra_env={KEY_ENV: key})
        wait_for(lambda: records(run.runs / "adhoc"), 60, "an answered case")
        run.proc.send_signal(signal.SIGTERM)
        assert run.wait() == 75, run.log.read_text()[-3000:]

        ops = tmp_path / "ops"
        ops.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("INFLIGHT_")}
        env[KEY_ENV] = key
        resumed = subprocess.Popen(
            [str(INFLIGHT), "resume", "--log-format", "json", "--pod-name", "ops",
             "--results-repo", bare_repo.url, *bare_repo.flags, "--config", str(models_file),
             "adhoc"], cwd=ops, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True)
        out = []
        reader = threading.Thread(target=lambda: out.extend(resumed.stdout), daemon=True)
        reader.start()
        # Stopped as soon as it shows what it runs: the demo takes 10 s.
        wait_for(lambda: resumed.poll() is not None or out, 60, "resume to run something")
        if resumed.poll() is None:
            resumed.send_signal(signal.SIGTERM)
        resumed.wait(timeout=60)
        reader.join(timeout=10)
        index = ops / ".inflight" / "runs" / "adhoc" / "index.jsonl"
        ran = [json.loads(line) for line in index.read_text().splitlines()] \
            if index.exists() else []
        assert not any("inflight-demo-eval" in line for line in out), out
        assert all("case" in record for record in ran), ran[-3:]


# A repeatable option of `inflight run` (--env, --inherit-env, --resume-arg,
# --param) just before `--` once took the `--` as the end of its own values,
# and the command's options after it were parsed as inflight's ("The
# following argument was not expected: --output", exit 2); docs/models.md's
# own example has that form.
def test_inflight_run_takes_every_word_after_the_double_dash_as_the_command(tmp_path, bare_repo):
    for last in (["--env", "WANTED=yes"], ["--inherit-env", "HOME"], ["--resume-arg", "--resume"]):
        run_id = "dash-" + last[0].strip("-")
        run = RunProcess(tmp_path, bare_repo, f"pod-{run_id}", *last, "--",
                         "/bin/sh", "-c", "exit 0", run_id=run_id)
        code = run.wait()
        log = run.log.read_text()
        assert code == 0 and "not expected" not in log, (last, code, log[-1000:])
