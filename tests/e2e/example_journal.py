"""What the examples' journal tests (test_example_agentv_journal.py,
test_example_promptfoo_journal.py) share: the example's inflight-journal.json
pointed at the fake provider, the tool's processes as /proc shows them, and
the places the provider's key must not be.

The journal's format is read through test_model_journal's helpers, the one
place that knows it."""
import json
import secrets
from pathlib import Path

from inflight_testing.git_servers import branches, git
from inflight_testing.procfs import descendants_of
from test_model_journal import (all_objects, journal_entries, journal_text,  # noqa: F401
                                model_log, wait_published)

KEY_ENV = "OPENAI_API_KEY"  # the examples' api_key_env
# The first six of the examples' 16 tests, two at a time (the templates'
# default workers or concurrency): three rounds of DELAY seconds an attempt.
QUESTIONS = {"sum-01": "What is 7 + 4?", "sum-02": "What is 14 + 7?",
             "sum-03": "What is 21 + 10?", "sum-04": "What is 28 + 13?",
             "sum-05": "What is 35 + 16?", "sum-06": "What is 42 + 19?"}
DELAY = 1.0  # under the default --flush-window, 2 s


def new_key():
    return f"sk-test-{secrets.token_hex(20)}"


def journal_config(example, provider, child, env=None, argv=()):
    """The example's inflight-journal.json, its model's upstream the fake
    provider, `env` added to the template's env and `argv` to its argv."""
    path = example / "inflight-journal.json"
    config = json.loads(path.read_text())
    assert config["models"]["openai"]["api_key_env"] == KEY_ENV
    config["models"]["openai"]["upstream"] = provider.url
    template = config["children"][child]
    template["env"].update(env or {})
    template["argv"] += list(argv)
    path.write_text(json.dumps(config))
    return config


def environ_map(raw):
    return dict(entry.split(b"=", 1) for entry in raw.split(b"\0") if b"=" in entry)


def tool_processes(serve, tool):
    """{pid: (cmdline, environ)} of serve's descendants, as bytes, and the pid
    of the tool's node process (its cmdline names node and the tool)."""
    found, node = {}, None
    for pid in descendants_of(serve.proc.pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            continue  # ended while read
        found[pid] = (cmdline, environ)
        argv = cmdline.split(b"\0")
        if node is None and argv[0].endswith(b"node") and tool.encode() in cmdline:
            node = pid
    assert node is not None, f"no {tool} node process below serve: {found}"
    return found, node


def assert_child_holds_a_token(processes, node, key, base_url):
    """The tool's node process reaches the model with a token, not the key;
    no process of the attempt holds the key in its environ or argv."""
    environ = environ_map(processes[node][1])
    token = environ[KEY_ENV.encode()].decode()
    assert token and token != key and key not in token
    assert environ[b"OPENAI_BASE_URL"].decode() == base_url
    for pid, (cmdline, environ) in processes.items():
        assert key.encode() not in environ, f"/proc/{pid}/environ holds the key"
        assert key.encode() not in cmdline, f"/proc/{pid}/cmdline holds the key"
    return token


def assert_key_nowhere(key, token, run_dirs, serves, repo, run_id):
    """Neither the key nor the child's token is in the run dirs (journal and
    console.log included), serve's logs, the commits or the published result."""
    for directory in run_dirs:
        assert journal_entries(directory), f"no journal in {directory}"
        journal = journal_text(directory)
        assert key.encode() not in journal and token.encode() not in journal
        assert b"authorization" not in journal.lower()
        console = (directory / "console.log").read_bytes()
        assert key.encode() not in console and token.encode() not in console
        for path in directory.rglob("*"):
            if path.is_file():
                assert key.encode() not in path.read_bytes(), path
    for serve in serves:
        log = "".join(serve.lines)
        assert key not in log and token not in log
    published = git(repo.bare, "ls-tree", "-r", "--name-only", f"refs/inflight-results/{run_id}")
    assert ".inflight/model-calls/calls-000001.jsonl" in published.split(), published
    result = git(repo.bare, "archive", f"refs/inflight-results/{run_id}", binary=True)
    assert key.encode() not in result and token.encode() not in result
    assert key not in git(repo.bare, "log", "-p", "--all")
    assert key.encode() not in all_objects(repo.bare)


def assert_calls_in_flight_recorded(provider, pod, run_id, run_dir, repo, sigterm_at):
    """After a SIGTERM with calls in flight: every call was read to its end
    and paid once upstream, one was under way at the signal, each answer is
    in the journal, and the run's branch holds its checkpoint."""
    paid = provider.paid()
    ledger = provider.ledger()
    assert all(e["completed"] and e["status"] == 200 for e in ledger), ledger
    assert any(e["started"] < sigterm_at < e["ended"] for e in ledger), "none in flight"
    assert [(e["source"], e["outcome"]) for e in model_log(pod, run_id)] == \
        [("upstream", "ok")] * paid
    assert len(journal_entries(run_dir)) == paid
    assert f"refs/heads/inflight/pod-a/{run_id}" in branches(repo.bare)
