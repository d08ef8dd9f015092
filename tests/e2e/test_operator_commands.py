"""`inflight checkpoints list/show/prune` against a real git daemon (docs/recovery.md "`inflight checkpoints`: list, show, prune")."""
import json
import os
import re
import signal
import subprocess
import time
from datetime import datetime, timedelta, timezone

import pytest

from inflight_testing.git_servers import branches, git
from conftest import INFLIGHT
from test_checkpoints import interrupted_runs

UNREACHABLE = "git://127.0.0.1:1/x.git"


def checkpoints(workdir, *args, repo=None, timeout=60):
    """`inflight checkpoints ARGS --results-repo REPO`, run from `workdir` with no INFLIGHT_* env."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFLIGHT_")}
    repo_args = ["--results-repo", repo] if repo else []
    return subprocess.run([str(INFLIGHT), "checkpoints", *args, *repo_args], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=timeout)


def branch_records(bare, run_id):
    return len(git(bare, "show", f"inflight/pod-a/{run_id}:index.jsonl").splitlines())


def branch_bytes(bare, run_id):
    """Bytes of every blob in the branch's tree (chunks add up to their file)."""
    listing = git(bare, "ls-tree", "-r", "-l", f"inflight/pod-a/{run_id}")
    return sum(int(line.split()[3]) for line in listing.splitlines())


def refs_of(ids):
    return {f"refs/heads/inflight/pod-a/{i}" for i in ids}


@pytest.fixture
def three_runs(serve_factory, tmp_path, git_daemon):
    """Three branches left by a serve shutdown, and an operator's empty work dir."""
    ids, _ = interrupted_runs(serve_factory, tmp_path / "pod-a", git_daemon, count=3)
    assert set(branches(git_daemon.bare)) == refs_of(ids)
    operator = tmp_path / "operator"
    operator.mkdir()
    return ids, git_daemon, operator


def test_list_json_shows_every_branch_with_its_records(three_runs):
    ids, server, operator = three_runs
    r = checkpoints(operator, "list", "--json", repo=server.url)
    assert r.returncode == 0, r.stderr
    rows = {c["run_id"]: c for c in json.loads(r.stdout)["checkpoints"]}
    assert sorted(rows) == sorted(ids)
    for run_id, row in rows.items():
        assert row["origin_pod"] == "pod-a"
        assert row["branch"] == f"inflight/pod-a/{run_id}"
        assert row["attempts"] == 1
        assert row["records"] == branch_records(server.bare, run_id) >= 2
        assert row["size_bytes"] == branch_bytes(server.bare, run_id)
        when = datetime.strptime(row["last_checkpoint"], "%Y-%m-%dT%H:%M:%SZ")
        age = datetime.now(timezone.utc).replace(tzinfo=None) - when
        assert timedelta(seconds=-5) < age < timedelta(minutes=5)


def test_list_table_is_aligned_and_filters_by_pod(three_runs):
    ids, server, operator = three_runs
    r = checkpoints(operator, "list", repo=server.url)
    assert r.returncode == 0, r.stderr
    header, *rows = r.stdout.splitlines()
    assert header.split("  ")[0] == "RUN ID" and "LAST CHECKPOINT" in header
    assert len(rows) == 3
    for row in rows:
        run_id, pod, attempts, age, records, size, state = re.split(r"\s{2,}", row)
        assert run_id in ids and pod == "pod-a" and attempts == "1" and state == "resumable"
        assert re.fullmatch(r"\d+[smhd] ago", age)
        assert int(records) == branch_records(server.bare, run_id)
        assert re.fullmatch(r"\d+(\.\d)? (B|KiB|MiB)", size)
        # Aligned: each column starts where its header does.
        assert row.index(pod) == header.index("POD")
    r = checkpoints(operator, "list", "--pod", "pod-z", repo=server.url)
    assert r.returncode == 0
    assert r.stdout.strip() == f"no checkpoints of pod pod-z on {server.url}"


def test_show_prints_branch_history_and_run_params(three_runs):
    ids, server, operator = three_runs
    for run_id in ids:
        tip = git(server.bare, "rev-parse", f"inflight/pod-a/{run_id}").strip()
        params = json.loads(git(server.bare, "show", f"inflight/pod-a/{run_id}:run-params.json"))
        r = checkpoints(operator, "show", run_id, "--json", repo=server.url)
        assert r.returncode == 0, r.stderr
        shown = json.loads(r.stdout)
        assert shown["branch"] == f"inflight/pod-a/{run_id}" and shown["tip"] == tip
        assert shown["run_params"] == params
        [latest] = shown["history"]
        assert latest["commit"] == tip and latest["reason"] == "shutdown"
        assert latest["attempt"] == 1 and latest["pod"] == "pod-a"
        assert latest["records"] == branch_records(server.bare, run_id)

        text = checkpoints(operator, "show", run_id, repo=server.url)
        assert text.returncode == 0, text.stderr
        assert f"inflight/pod-a/{run_id}" in text.stdout and tip in text.stdout
        assert re.search(r"shutdown\s+1\s+pod-a\s+\d+\s+" + tip[:12], text.stdout)
        assert f'"run_id": "{run_id}"' in text.stdout


def test_show_of_a_missing_run_exits_4_and_says_what_to_try(three_runs):
    _, server, operator = three_runs
    r = checkpoints(operator, "show", "no-such-run", repo=server.url)
    assert r.returncode == 4
    assert "no-such-run" in r.stderr and "inflight checkpoints list" in r.stderr


def age_branch(bare, run_id, *, tip_old):
    """Adds an old checkpoint to the branch: as its tip, or below a fresh tip."""
    ref = f"refs/heads/inflight/pod-a/{run_id}"
    old = {"GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z"}
    subject = f"inflight checkpoint {run_id} attempt 1 (periodic)"
    commit = git(bare, "commit-tree", f"{ref}^{{tree}}", "-p", ref, "-m", subject, env=old).strip()
    if not tip_old:
        commit = git(bare, "commit-tree", f"{ref}^{{tree}}", "-p", commit, "-m", subject).strip()
    git(bare, "update-ref", ref, commit)


def test_prune_deletes_exactly_what_each_selector_says(three_runs):
    ids, server, operator = three_runs
    before = branches(server.bare)
    r = checkpoints(operator, "prune", "--all", "--dry-run", repo=server.url)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == sorted(f"would delete inflight/pod-a/{i}" for i in ids)
    assert branches(server.bare) == before

    r = checkpoints(operator, "prune", "--run-id", ids[0], repo=server.url)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"deleted inflight/pod-a/{ids[0]}"]
    assert set(branches(server.bare)) == refs_of(ids[1:])

    age_branch(server.bare, ids[1], tip_old=True)
    age_branch(server.bare, ids[2], tip_old=False)  # old history, fresh last checkpoint
    r = checkpoints(operator, "prune", "--older-than", "1d", repo=server.url)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"deleted inflight/pod-a/{ids[1]}"]
    assert set(branches(server.bare)) == refs_of(ids[2:])

    r = checkpoints(operator, "prune", "--all", repo=server.url)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"deleted inflight/pod-a/{ids[2]}"]
    assert branches(server.bare) == {}
    r = checkpoints(operator, "list", repo=server.url)
    assert r.stdout.strip() == f"no checkpoints on {server.url}"


def test_prune_keeps_a_live_pods_branch_unless_take_over(serve_factory, tmp_path, git_daemon):
    """A one-shot command cannot watch a lease for its term: the branch of a
    run whose pod holds a lease is live, and kept without --take-over."""
    serve = serve_factory("--pod-name", "pod-a", "--results-repo", git_daemon.url,
                          "--checkpoint-interval", "100ms")
    serve.wait_ready()
    run_id = serve.submit(tests=200, test_ms=100)
    serve.wait_log(lambda e: e.get("msg") == "checkpoint pushed" and e.get("run_id") == run_id, 30)
    operator = tmp_path / "operator"
    operator.mkdir()
    r = checkpoints(operator, "prune", "--run-id", run_id, repo=git_daemon.url)
    assert r.returncode != 0 and "live: pod pod-a holds a lease" in r.stderr, r.stderr
    assert f"refs/heads/inflight/pod-a/{run_id}" in branches(git_daemon.bare)
    # The pod is gone (its lease stays): the operator takes over.
    serve.proc.send_signal(signal.SIGKILL)
    serve.proc.wait(timeout=10)
    r = checkpoints(operator, "prune", "--run-id", run_id, "--take-over", repo=git_daemon.url)
    assert r.returncode == 0, r.stderr
    assert f"refs/heads/inflight/pod-a/{run_id}" not in branches(git_daemon.bare)


def test_prune_of_an_unknown_run_id_exits_4_and_deletes_nothing(three_runs):
    ids, server, operator = three_runs
    r = checkpoints(operator, "prune", "--run-id", "no-such-run", repo=server.url)
    assert r.returncode == 4
    assert "no-such-run" in r.stderr and "inflight checkpoints list" in r.stderr
    assert set(branches(server.bare)) == refs_of(ids)


@pytest.mark.parametrize("args", [["list"], ["show", "r1"], ["prune", "--all"]])
def test_unreachable_remote_exits_3(tmp_path, args):
    r = checkpoints(tmp_path, *args, "--git-timeout", "10s", repo=UNREACHABLE)
    assert r.returncode == 3, r.stderr
    assert "127.0.0.1" in r.stderr and "--results-repo" in r.stderr


@pytest.mark.parametrize("args", [
    ["frobnicate"], [], ["list", "--frobnicate"], ["show"], ["prune"],
    ["prune", "--all", "--run-id", "r1"], ["prune", "--older-than", "soon"],
])
def test_usage_errors_exit_2(tmp_path, args):
    r = checkpoints(tmp_path, *args, repo=UNREACHABLE)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip()


def test_refused_credentials_exit_3_without_the_token(tmp_path, http_git):
    r = checkpoints(tmp_path, "list", *http_git.flags, repo=http_git.url)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"no checkpoints on {http_git.url}"
    r = checkpoints(tmp_path, "list", *http_git.wrong_flags, repo=http_git.url)
    assert r.returncode == 3, r.stderr
    assert "--git-token" in r.stderr
    for flags in (http_git.flags, http_git.wrong_flags):
        token = flags[flags.index("--git-token") + 1]
        assert token not in r.stdout + r.stderr


def test_a_run_id_on_two_pods_asks_for_the_branch(three_runs):
    ids, server, operator = three_runs
    tip = git(server.bare, "rev-parse", f"inflight/pod-a/{ids[0]}").strip()
    git(server.bare, "update-ref", f"refs/heads/inflight/pod-b/{ids[0]}", tip)
    r = checkpoints(operator, "show", ids[0], repo=server.url)
    assert r.returncode == 2
    assert f"inflight/pod-a/{ids[0]}" in r.stderr and f"inflight/pod-b/{ids[0]}" in r.stderr
    r = checkpoints(operator, "show", f"inflight/pod-b/{ids[0]}", "--json", repo=server.url)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["origin_pod"] == "pod-b"


def test_a_hung_remote_exits_3_at_the_deadline(tmp_path, hung_server):
    started = time.monotonic()
    r = checkpoints(tmp_path, "list", "--git-timeout", "1s", repo=hung_server.git_url)
    assert r.returncode == 3, r.stderr
    assert time.monotonic() - started < 5
    assert "--git-timeout" in r.stderr


def test_list_and_prune_make_one_connection_each_whatever_the_branch_count(three_runs):
    """Issue 10: list reads every tip over the connection that listed them;
    prune deletes every branch in one push."""
    ids, server, operator = three_runs

    def requests():
        log = server.process.output()
        return log.count("Request upload-pack"), log.count("Request receive-pack")

    before = requests()
    r = checkpoints(operator, "list", "--json", repo=server.url)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["checkpoints"]) == len(ids)
    listed = requests()
    assert (listed[0] - before[0], listed[1] - before[1]) == (1, 0), "list: one fetch connection"
    r = checkpoints(operator, "prune", "--older-than", "0s", repo=server.url)
    assert r.returncode == 0, r.stderr
    assert not branches(server.bare)
    pruned = requests()
    assert (pruned[0] - listed[0], pruned[1] - listed[1]) == (1, 1), \
        "prune: one listing (its tips already in the cache) and one push"
