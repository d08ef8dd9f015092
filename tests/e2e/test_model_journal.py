"""The model-call journal (SPEC §13): with `models` in the config, a child
reaches its provider through inflight, which records every answer in the run
dir and answers a later attempt's identical request from it. A tool with no
resume of its own, run again from its start on a wiped disk, pays each call
once; a call in flight at a shutdown is read to its end within the flush
window and saved, one the window cuts is paid again (twice, never more); a
SIGKILL pays again only for the calls the last periodic checkpoint had not
pushed; a child's token reaches no provider, its own token opens no other model, and
the provider's key is in no child, file, log, commit or result.

The provider is tests/support/inflight_testing/model_provider.py, a real
HTTP server whose ledger counts the calls it was paid for; the children are
tests/e2e/children/model_caller.py (an eval with no resume) and
model_probe.py (a child trying what it should not).

What these tests take of the journal's format (the implementers', SPEC §13)
is kept in the helpers under "the journal" below: files
.inflight/model-calls/calls-NNNNNN.jsonl in the run dir, one record per
answered call: a JSON header line whose "body_bytes" gives the length of the
answer's body that follows it as the child got it (a stream's events in
order), then a newline. A call is told by its answer, which repeats the
prompt ("answer to case-3")."""
import base64
import json
import secrets
import signal
import stat
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import CHILDREN, PYTHON
from inflight_testing.git_servers import git
from inflight_testing.model_provider import ModelProvider
from inflight_testing.results_index import index_entry
from inflight_testing.waiting import wait_for
from test_child_secrets import environ_map, serve_binary

KEY_ENV = "PROVIDER_KEY"
INPUT_TOKENS = 11  # the provider's usage for a one-word prompt ("case-3"): words + 10
OUTPUT_TOKENS = 7
CACHE_READ_TOKENS = 2  # Anthropic's message_start, beside input_tokens
JOURNAL = Path(".inflight") / "model-calls"


@pytest.fixture
def key():
    return f"sk-test-{secrets.token_hex(20)}"


# --------------------------------------------------------------------------
# configs and pods


def openai_model(provider, **extra):
    return {"upstream": provider.url, "api_key_env": KEY_ENV, **extra}


def write_config(tmp_path, models, children, **options):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"models": models, "children": children, **options}))
    return path


def caller(cases, api="chat", stream=False, model="openai", flags=()):
    """A template running model_caller.py, with no resume of its own."""
    if api == "messages":
        env = {"ANTHROPIC_BASE_URL": f"{{model_url:{model}}}", "ANTHROPIC_API_KEY": "{model_key}"}
    else:
        env = {"OPENAI_BASE_URL": f"{{model_url:{model}}}/v1", "OPENAI_API_KEY": "{model_key}"}
    return {
        "argv": [PYTHON, str(CHILDREN / "model_caller.py"), "--output", "{output_dir}",
                 "--cases", str(cases), "--api", api, "--attempt", "{attempt}",
                 *(["--stream"] if stream else []), *flags],
        "resume_argv": [],
        "env": env,
        "progress_file": "index.jsonl",
    }


def start_pod(serve_factory, tmp_path, name, repo, config, *args, env=None, **kw):
    """`serve` as pod `name`, in a workdir of its own: a new name is a wiped disk."""
    workdir = tmp_path / name
    workdir.mkdir(exist_ok=True)
    serve = serve_factory("--pod-name", name, "--results-repo", repo.url, *repo.flags,
                          "--config", str(config), *args, workdir=workdir, env=env, **kw)
    serve.wait_ready()
    return serve


def run_dir(serve, run_id):
    return serve.workdir / ".inflight" / "runs" / run_id


def records(directory):
    """The complete lines of the child's index.jsonl, parsed."""
    path = Path(directory) / "index.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines(keepends=True)
            if line.endswith("\n")]


def shut_down(serve):
    serve.signal(signal.SIGTERM)
    code = serve.wait_exit(timeout=90)
    assert code == 0, "".join(serve.lines[-30:])


def model_log(serve, run_id, msg="model call ended"):
    return [e for e in serve.events() if e.get("msg") == msg and e.get("run_id") == run_id]


def wait_published(serve, run_id):
    serve.wait_log(lambda e: e.get("msg") == "checkpoint branch deleted" and
                   e.get("run_id") == run_id, 90)


def metric_value(serve, name, **labels):
    """The sample of `name` with exactly these labels (in any order) on
    /metrics; 0 when absent (a counter never incremented)."""
    for line in serve.get("/metrics").body.splitlines():
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            metric, rest = line.split("{", 1)
            label_text, rest = rest.rsplit("}", 1)
            found = dict(pair.split("=", 1) for pair in label_text.split(",") if pair)
            found = {k.strip(): v.strip().strip('"') for k, v in found.items()}
        else:
            metric, rest = line.split(" ", 1)
            found = {}
        if metric == name and found == labels:
            return float(rest.split()[0])
    return 0.0


# --------------------------------------------------------------------------
# the journal (the one place that knows its format)


def journal_records(data):
    """The records of a segment's bytes, each (offset, its bytes): a header
    line, then for "v": 2 its "body_bytes" bytes and a newline (a "v": 1
    line, written before, holds its body)."""
    records, at = [], 0
    while at < len(data):
        end = data.index(b"\n", at) + 1
        header = json.loads(data[at:end])
        if header["v"] == 2:
            end += header["body_bytes"] + 1
        assert end <= len(data) and data[end - 1:end] == b"\n", f"a torn record at {at}"
        records.append((at, data[at:end]))
        at = end
    return records


def journal_entry(record):
    """A record's header fields, its body as text in "body"."""
    header, _, rest = record.partition(b"\n")
    entry = json.loads(header)
    if entry["v"] == 2:
        entry["body"] = rest[:-1].decode(errors="replace")
    return entry


def journal_entries(directory):
    """Every recorded call of the run dir, in file and record order."""
    return [journal_entry(record)
            for path in sorted((Path(directory) / JOURNAL).glob("calls-*.jsonl"))
            for _, record in journal_records(path.read_bytes())]


def journal_text(directory):
    return b"".join(p.read_bytes() for p in sorted((Path(directory) / JOURNAL).glob("*")))


def strings_of(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings_of(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_of(v)


def views_of(entry):
    """The texts an entry may keep a request or an answer in: its strings as
    they are, its base64 strings decoded (a v1 line's body that was not
    UTF-8), and the entry as compact JSON (for events kept parsed)."""
    strings = list(strings_of(entry))
    decoded = []
    for s in strings:
        if len(s) >= 8 and len(s) % 4 == 0:
            try:
                decoded.append(base64.b64decode(s, validate=True).decode())
            except ValueError:
                pass
    return ["".join(strings), "".join(decoded), json.dumps(entry, separators=(",", ":"))]


def mentioning(entries, text):
    return [e for e in entries if any(text in view for view in views_of(e))]


def holds_stream(entry, sent):
    """Whether the entry keeps every event of the stream `sent` (bytes, as the
    provider wrote them), in order: the data of each event, as sent."""
    data = [line[len("data: "):] for line in sent.decode().split("\n")
            if line.startswith("data: ")]
    for view in views_of(entry):
        at = 0
        for d in data:
            at = view.find(d, at)
            if at < 0:
                break
            at += len(d)
        else:
            return True
    return False


# --------------------------------------------------------------------------
# replay across a shutdown and a wiped disk


def test_a_tool_without_resume_pays_once_per_call_across_a_sigterm_and_a_wiped_disk(
        serve_factory, bare_repo, tmp_path, key):
    cases = 8
    with ModelProvider(api_key=key, delay=0.3) as provider:
        config = write_config(tmp_path, {"openai": openai_model(provider)},
                              {"caller": caller(cases)})
        pod_a = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config, env={KEY_ENV: key})
        listener = pod_a.wait_log(lambda e: e.get("msg") == "model listener", 10)
        assert listener and listener["address"].startswith("127.0.0.1:"), listener
        # Every series is there at 0 before the first call, for the alert's increase().
        assert ('inflight_model_calls_total{model="openai",source="upstream",outcome="error"} 0'
                in pod_a.get("/metrics").body.splitlines())
        run_id = pod_a.submit(child="caller", id="no-resume")
        dir_a = run_dir(pod_a, run_id)
        wait_for(lambda: len(records(dir_a)) >= 4, 60, "four answered cases")
        shut_down(pod_a)

        first = {r["case"]: r["answer"] for r in records(dir_a)}
        paid_before = provider.paid()
        assert 4 <= len(first) <= paid_before < cases
        # The call in flight at the SIGTERM was read to its end and recorded.
        assert all(e["completed"] for e in provider.ledger()), provider.ledger()
        ended_a = model_log(pod_a, run_id)
        assert len(ended_a) == paid_before
        assert {(e["source"], e["outcome"], e["model"]) for e in ended_a} == \
            {("upstream", "ok", "openai")}
        assert [e["output_tokens"] for e in ended_a] == [OUTPUT_TOKENS] * paid_before
        assert len(journal_entries(dir_a)) == paid_before

        pod_b = start_pod(serve_factory, tmp_path, "pod-b", bare_repo, config, env={KEY_ENV: key})
        pod_b.wait_status(run_id, "succeeded", timeout=90)

        # Each question was paid for once, over both attempts.
        assert Counter(e["prompt"] for e in provider.ledger()) == \
            {f"case-{i}": 1 for i in range(cases)}
        second = [r for r in records(run_dir(pod_b, run_id)) if r["attempt"] == 2]
        assert [r["case"] for r in second] == list(range(cases))
        assert all(r["answer"] == f"answer to case-{r['case']}" for r in second)
        assert all(r["answer"] == first[r["case"]] for r in second if r["case"] in first)

        started_b = model_log(pod_b, run_id, "model call started")
        assert len(started_b) == cases
        assert all(e["attempt"] == 2 and e["request_bytes"] > 0 and e["model"] == "openai"
                   for e in started_b), started_b
        ended_b = model_log(pod_b, run_id)
        replayed = [e for e in ended_b if e["source"] == "journal"]
        assert len(replayed) == paid_before >= len(first)
        assert all(e["outcome"] == "ok" and e["status"] == 200 for e in ended_b), ended_b
        assert [e["source"] for e in ended_b] == \
            ["journal"] * paid_before + ["upstream"] * (cases - paid_before)

        # Run status: summed over both attempts; `calls` counts replayed ones
        # too, tokens are what was paid, saved_* what replay spared.
        model = pod_b.status(run_id)["model"]
        assert model["replayed"] == paid_before
        assert model["calls"] - model["replayed"] == cases
        assert model["input_tokens"] == INPUT_TOKENS * cases
        assert model["output_tokens"] == OUTPUT_TOKENS * cases
        assert model["saved_input_tokens"] == INPUT_TOKENS * paid_before
        assert model["saved_output_tokens"] == OUTPUT_TOKENS * paid_before

        calls = "inflight_model_calls_total"
        assert metric_value(pod_b, calls, model="openai", source="journal", outcome="ok") == \
            paid_before
        assert metric_value(pod_b, calls, model="openai", source="upstream", outcome="ok") == \
            cases - paid_before
        tokens = "inflight_model_tokens_total"
        assert metric_value(pod_b, tokens, model="openai", kind="output", source="upstream") == \
            OUTPUT_TOKENS * (cases - paid_before)
        assert metric_value(pod_b, tokens, model="openai", kind="output", source="journal") == \
            OUTPUT_TOKENS * paid_before
        assert metric_value(pod_b, "inflight_model_calls_in_flight") == 0

        wait_published(pod_b, run_id)
        assert index_entry(bare_repo.bare, run_id)["model"] == pod_b.status(run_id)["model"]
        published = [json.loads(line) for line in git(
            bare_repo.bare, "show", f"refs/inflight-results/{run_id}:index.jsonl").splitlines()]
        assert sorted(r["case"] for r in published if r["attempt"] == 2) == list(range(cases))


def test_a_stream_in_flight_at_sigterm_is_read_to_its_end_and_paid_once(
        serve_factory, bare_repo, tmp_path, key):
    cases = 3
    with ModelProvider(api_key=key, delay=1.5) as provider:
        config = write_config(tmp_path, {"openai": openai_model(provider)},
                              {"caller": caller(cases, stream=True, flags=["--raw"])})
        args = ("--flush-window", "5s", "--grace-period", "20s")
        pod_a = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config, *args,
                          env={KEY_ENV: key})
        run_id = pod_a.submit(child="caller")
        provider.wait_for_call("case-1", 60)
        sigterm_at = time.monotonic()
        shut_down(pod_a)

        in_flight = next(e for e in provider.ledger() if e["prompt"] == "case-1")
        assert in_flight["completed"], "the stream in flight was not read to its end"
        assert in_flight["started"] < sigterm_at < in_flight["ended"], "not in flight at SIGTERM"
        dir_a = run_dir(pod_a, run_id)
        assert [r["case"] for r in records(dir_a)] == [0], "the child outlived the SIGTERM"
        ended_a = model_log(pod_a, run_id)
        assert [(e["source"], e["outcome"]) for e in ended_a] == [("upstream", "ok")] * 2
        assert [e["output_tokens"] for e in ended_a] == [OUTPUT_TOKENS] * 2
        assert [e["input_tokens"] for e in ended_a] == [INPUT_TOKENS] * 2
        assert len(journal_entries(dir_a)) == 2
        assert mentioning(journal_entries(dir_a), "case-1")

        pod_b = start_pod(serve_factory, tmp_path, "pod-b", bare_repo, config, *args,
                          env={KEY_ENV: key})
        pod_b.wait_status(run_id, "succeeded", timeout=90)
        assert Counter(e["prompt"] for e in provider.ledger()) == \
            {f"case-{i}": 1 for i in range(cases)}
        assert [e["source"] for e in model_log(pod_b, run_id)] == ["journal", "journal", "upstream"]
        # The stream the first child never finished reached the second whole,
        # byte for byte as the provider sent it.
        raw = run_dir(pod_b, run_id) / "raw"
        sent = {e["prompt"]: e["sent"] for e in provider.ledger()}
        for i in range(cases):
            assert (raw / f"a2-case-{i}.bin").read_bytes() == sent[f"case-{i}"], f"case-{i}"
        assert pod_b.status(run_id)["model"]["replayed"] == 2


def test_a_call_cut_by_the_flush_window_is_not_recorded_and_is_paid_twice_never_more(
        serve_factory, bare_repo, tmp_path, key):
    cases = 3
    with ModelProvider(api_key=key, delay=0.2) as provider:
        provider.set_delay(4.0, when="case-1")
        config = write_config(tmp_path, {"openai": openai_model(provider)},
                              {"caller": caller(cases, api="responses", stream=True)})
        pod_a = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config,
                          "--flush-window", "1s", env={KEY_ENV: key})
        run_id = pod_a.submit(child="caller")
        provider.wait_for_call("case-1", 60)
        shut_down(pod_a)

        ended_a = model_log(pod_a, run_id)
        assert [e["outcome"] for e in ended_a] == ["ok", "cut"], ended_a
        assert all(e["source"] == "upstream" for e in ended_a)
        cut = next(e for e in provider.ledger() if e["prompt"] == "case-1")
        assert not cut["completed"]
        entries = journal_entries(run_dir(pod_a, run_id))
        assert len(entries) == 1 and mentioning(entries, "case-0")
        assert not mentioning(entries, "case-1"), "a cut answer was recorded"

        provider.clear_delays()
        pod_b = start_pod(serve_factory, tmp_path, "pod-b", bare_repo, config,
                          "--flush-window", "1s", env={KEY_ENV: key})
        pod_b.wait_status(run_id, "succeeded", timeout=90)
        assert Counter(e["prompt"] for e in provider.ledger()) == \
            {"case-0": 1, "case-1": 2, "case-2": 1}
        assert [e["source"] for e in model_log(pod_b, run_id)] == \
            ["journal", "upstream", "upstream"]
        assert pod_b.status(run_id)["model"]["replayed"] == 1


def pushed_journal(repo, ref):
    """The journal entries of a branch's tip (its first segment, stored whole
    while under 64 KiB)."""
    try:
        data = git(repo.bare, "show", f"{ref}:{JOURNAL}/calls-000001.jsonl", binary=True)
    except AssertionError:
        return []
    return [journal_entry(record) for _, record in journal_records(data)]


def test_a_sigkill_loses_at_most_the_calls_the_last_periodic_checkpoint_had_not_pushed(
        serve_factory, bare_repo, tmp_path, key):
    """serve SIGKILLed: no flush, no shutdown checkpoint. The next pod (after
    the lease's term) replays what the last periodic checkpoint pushed; only
    the calls recorded since are paid again, once."""
    cases = 12
    with ModelProvider(api_key=key, delay=0.3) as provider:
        config = write_config(tmp_path, {"openai": openai_model(provider)},
                              {"caller": caller(cases)})
        args = ("--checkpoint-interval", "1s", "--grace-period", "3s", "--flush-window", "1s")
        pod_a = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config, *args,
                          env={KEY_ENV: key})
        run_id = pod_a.submit(child="caller", id="killed")
        ref = f"refs/heads/inflight/pod-a/{run_id}"
        wait_for(lambda: len(pushed_journal(bare_repo, ref)) >= 3, 60,
                 "a periodic checkpoint with three recorded calls")
        pod_a.proc.kill()
        pod_a.wait_exit()
        subprocess.run(["pkill", "-KILL", "-f", str(run_dir(pod_a, run_id))], check=False)
        pushed = pushed_journal(bare_repo, ref)
        saved = {p for p in (f"case-{i}" for i in range(cases)) if mentioning(pushed, p)}
        paid_before = provider.paid()
        assert len(saved) == len(pushed) < paid_before <= cases

        pod_b = start_pod(serve_factory, tmp_path, "pod-b", bare_repo, config, *args,
                          env={KEY_ENV: key})
        wait_for(lambda: pod_b.get(f"/api/eval/status/{run_id}").status == 200, 30,
                 "pod-b to take the run once pod-a's lease is over")
        pod_b.wait_status(run_id, "succeeded", timeout=90)
        paid = Counter(e["prompt"] for e in provider.ledger())
        assert set(paid) == {f"case-{i}" for i in range(cases)}
        assert all(paid[p] == 1 for p in saved), paid
        assert all(n <= 2 for n in paid.values()), paid
        ended = model_log(pod_b, run_id)
        assert [e["source"] for e in ended] == \
            ["journal"] * len(saved) + ["upstream"] * (cases - len(saved)), ended


# --------------------------------------------------------------------------
# tokens and keys


def probe_template():
    return {
        "argv": [PYTHON, str(CHILDREN / "model_probe.py"), "--output", "{output_dir}"],
        "optional": {"foreign": ["--foreign-token-file", "{foreign}"]},
        "params": {"foreign": {"type": "string", "pattern": "^[A-Za-z0-9_./-]+$"}},
        "resume_argv": [],
        "env": {"OPENAI_BASE_URL": "{model_url:openai}/v1", "OPENAI_API_KEY": "{model_key}"},
    }


def test_a_wrong_token_or_an_unnamed_model_never_reaches_the_provider(
        serve_factory, bare_repo, tmp_path, key):
    with ModelProvider(api_key=key) as provider:
        models = {"openai": openai_model(provider),
                  "anthropic": openai_model(provider, auth="x-api-key")}
        config = write_config(tmp_path, models, {"probe": probe_template()})
        pod = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config, env={KEY_ENV: key})
        address = pod.wait_log(lambda e: e.get("msg") == "model listener", 10)["address"]

        first = pod.submit(child="probe")
        pod.wait_status(first, "succeeded", timeout=60)
        # The first run's attempt has ended: its token is another run's, and dead.
        second = pod.submit(child="probe", foreign=str(run_dir(pod, first) / "token"))
        pod.wait_status(second, "succeeded", timeout=60)

        expected = {"own": 200, "wrong": 401, "none": 401, "unnamed": 404, "unknown": 404}
        tokens = []
        for run_id, statuses in ((first, expected), (second, expected | {"foreign": 401})):
            probe = json.loads((run_dir(pod, run_id) / "probe.json").read_text())
            assert probe["statuses"] == statuses, probe
            assert probe["base_url"] == f"http://{address}/models/openai/v1"
            tokens.append((run_dir(pod, run_id) / "token").read_text())
        assert tokens[0] != tokens[1] and key not in tokens

        # Only the two control calls reached the provider, with its key.
        assert [e["prompt"] for e in provider.ledger()] == ["probe-own", "probe-own"]
        assert provider.refused() == [] and provider.unrouted() == []
        assert all(e["headers"]["authorization"] == f"Bearer {key}" for e in provider.ledger())


def all_objects(bare):
    """Every object of the repo, reachable or not, as bytes."""
    return git(bare, "cat-file", "--batch-all-objects", "--batch", binary=True)


def test_the_key_is_in_no_child_file_log_or_commit_and_the_token_goes_no_further(
        serve_factory, bare_repo, tmp_path, key):
    cases = 3
    with ModelProvider(api_key=key, delay=0.05) as provider:
        template = caller(cases, flags=["--dump-proc", "--extra-credentials"])
        config = write_config(tmp_path, {"openai": openai_model(provider)}, {"caller": template})
        pod = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config,
                        "--checkpoint-interval", "200ms", env={KEY_ENV: key},
                        binary=serve_binary(tmp_path))
        run_id = pod.submit(child="caller")
        pod.wait_status(run_id, "succeeded", timeout=60)
        wait_published(pod, run_id)
        directory = run_dir(pod, run_id)

        # The child: its environ, argv and its parents' (what it can read).
        proc = json.loads((directory / "proc.json").read_text())
        token = environ_map(proc["environ"])["OPENAI_API_KEY"]
        assert token and token != key and key not in token
        assert key not in proc["environ"] and key not in proc["cmdline"]
        assert pod.proc.pid in [parent["pid"] for parent in proc["parents"]], proc["parents"]
        for parent in proc["parents"]:
            for view in ("environ", "cmdline"):
                assert key not in (parent[view] or ""), f"/proc/{parent['pid']}/{view}"
        for view in ("environ", "cmdline"):
            shown = open(f"/proc/{pod.proc.pid}/{view}", "rb").read()
            assert key.encode() not in shown, f"serve's /proc {view} shows the key"

        # The run dir (journal and console.log included), serve's log.
        entries = journal_entries(directory)
        assert len(entries) == cases
        for path in directory.rglob("*"):
            if path.is_file():
                assert key.encode() not in path.read_bytes(), path
        journal = journal_text(directory)
        assert token.encode() not in journal
        assert b"authorization" not in journal.lower() and b"x-api-key" not in journal.lower()
        assert token.encode() not in (directory / "console.log").read_bytes()
        log = "".join(pod.lines)
        assert key not in log and token not in log

        # The results repo: every commit, the published result, every object.
        published = git(bare_repo.bare, "ls-tree", "-r", "--name-only",
                        f"refs/inflight-results/{run_id}").split()
        assert any(name.startswith(f"{JOURNAL}/calls-") for name in published), published
        assert key not in git(bare_repo.bare, "log", "-p", "--all")
        assert key.encode() not in all_objects(bare_repo.bare)

        # Upstream got the real key in the token's place, and no other credential.
        assert provider.paid() == cases and provider.refused() == []
        for call in provider.ledger():
            headers = call["headers"]
            assert headers["authorization"] == f"Bearer {key}"
            assert not {"x-api-key", "api-key", "cookie", "proxy-authorization"} & set(headers)
            assert not any(token in value for value in headers.values()), headers


# --------------------------------------------------------------------------
# Anthropic


def test_anthropic_streams_through_a_key_file_are_recorded_and_replayed_byte_for_byte(
        serve_factory, bare_repo, tmp_path, key):
    cases = 4
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    key_file = secrets_dir / "anthropic-key"
    key_file.write_text(key + "\n")  # as a Secret's volume may hold it
    key_file.chmod(stat.S_IRUSR)
    # Serial numbers in every answer's ids: an answer paid again differs.
    with ModelProvider(api_key=key, delay=0.3, unique_ids=True) as provider:
        models = {"anthropic": {"upstream": provider.url, "auth": "x-api-key",
                                "api_key_file": str(key_file)}}
        template = caller(cases, api="messages", stream=True, model="anthropic", flags=["--raw"])
        config = write_config(tmp_path, models, {"claude": template})
        pod_a = start_pod(serve_factory, tmp_path, "pod-a", bare_repo, config)
        run_id = pod_a.submit(child="claude")
        dir_a = run_dir(pod_a, run_id)
        wait_for(lambda: len(records(dir_a)) >= 2, 60, "two answered cases")
        shut_down(pod_a)
        first = {r["case"]: r["answer"] for r in records(dir_a)}
        paid_before = provider.paid()

        pod_b = start_pod(serve_factory, tmp_path, "pod-b", bare_repo, config)
        pod_b.wait_status(run_id, "succeeded", timeout=90)
        ledger = provider.ledger()
        assert Counter(e["prompt"] for e in ledger) == {f"case-{i}": 1 for i in range(cases)}
        for call in ledger:
            assert call["path"] == "/v1/messages" and call["stream"] and call["completed"]
            assert call["headers"]["x-api-key"] == key
            assert call["headers"]["anthropic-version"] == "2023-06-01"
            assert "authorization" not in call["headers"]

        # The child's answers and bytes: the replayed ones as the first child
        # got them, and as the provider sent them.
        directory = run_dir(pod_b, run_id)
        second = {r["case"]: r["answer"] for r in records(directory) if r["attempt"] == 2}
        assert second == {i: f"answer to case-{i}" for i in range(cases)}
        assert all(second[case] == answer for case, answer in first.items())
        sent = {e["prompt"]: e["sent"] for e in ledger}
        raw = directory / "raw"
        for i in range(cases):
            assert (raw / f"a2-case-{i}.bin").read_bytes() == sent[f"case-{i}"], f"case-{i}"
        for case in first:
            assert (raw / f"a1-case-{case}.bin").read_bytes() == sent[f"case-{case}"]

        # The journal keeps each stream's events as the provider sent them.
        entries = journal_entries(directory)
        for i in range(cases):
            recorded = mentioning(entries, f"case-{i}")
            assert recorded and all(holds_stream(e, sent[f"case-{i}"]) for e in recorded), i
        assert key.encode() not in journal_text(directory)

        ended_b = model_log(pod_b, run_id)
        assert [e["source"] for e in ended_b] == \
            ["journal"] * paid_before + ["upstream"] * (cases - paid_before)
        assert all(e["model"] == "anthropic" and e["outcome"] == "ok" for e in ended_b)
        model = pod_b.status(run_id)["model"]
        assert model["replayed"] == paid_before
        assert model["output_tokens"] == OUTPUT_TOKENS * cases
        # Whether cache reads count as input is the implementers' choice.
        assert model["input_tokens"] in (INPUT_TOKENS * cases,
                                         (INPUT_TOKENS + CACHE_READ_TOKENS) * cases)
