"""A results repo written by the pods of layout 1 (a result ref per run and a
flat `inflight-index`; tests/fixtures/results-v1.bundle, made by
scripts/make-results-v1-fixture before the layout changed) keeps working:
`runs list|show|logs` read it as its pods left it, and a new pod takes over
its waiting run, finishes it and publishes it beside the old results, running
no finished run again. `runs migrate` moves it to the history layout
(docs/results.md "The history layout"): every field listed stays what it was,
and pods go on, publishing into the log."""
import json
import os
import subprocess
from pathlib import Path

from inflight_testing.git_servers import git
from conftest import INFLIGHT, demo_child

BUNDLE = Path(__file__).resolve().parent.parent / "fixtures" / "results-v1.bundle"
FINISHED = ["v1-done-a", "v1-model"]  # v1-done-b's result ref was deleted


def load_fixture(server):
    git(server.bare, "fetch", "-q", str(BUNDLE), "+refs/*:refs/*")


def runs(workdir, server, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFLIGHT_")}
    return subprocess.run([str(INFLIGHT), "runs", *args, "--results-repo", server.url,
                           *server.flags], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=60)


def listed(workdir, server):
    r = runs(workdir, server, "list", "--json")
    assert r.returncode == 0, r.stderr
    return {row["id"]: row for row in json.loads(r.stdout)["runs"]}, r.stderr


def test_a_layout_1_repo_reads_as_its_pods_left_it(tmp_path, git_daemon):
    load_fixture(git_daemon)
    rows, warnings = listed(tmp_path, git_daemon)
    assert sorted(rows) == sorted(FINISHED + ["v1-done-b", "v1-live"])
    for run_id in FINISHED:
        row = rows[run_id]
        assert row["state"] == "succeeded" and row["pod"] == "pod-a", row
        assert row["where"] == f"refs/inflight-results/{run_id}"
    assert rows["v1-done-a"]["records"] == 3
    assert rows["v1-done-b"]["state"] == "succeeded"  # from its index entry alone
    assert rows["v1-live"]["where"] == "inflight/pod-a/v1-live"
    assert "not-a-run.json" in warnings

    # The unfinished runs alone read no index: its bad file goes unseen.
    live = runs(tmp_path, git_daemon, "list", "--json", "--state", "live")
    assert live.returncode == 0, live.stderr
    assert [row["id"] for row in json.loads(live.stdout)["runs"]] == ["v1-live"]
    assert "not-a-run.json" not in live.stderr
    waiting = runs(tmp_path, git_daemon, "list", "--state", "waiting")
    assert waiting.returncode == 0 and "no runs waiting" in waiting.stdout, waiting.stdout

    logs = runs(tmp_path, git_daemon, "logs", "v1-done-a")
    assert logs.returncode == 0, logs.stderr
    assert "all 3 tests done" in logs.stdout
    shown = runs(tmp_path, git_daemon, "show", "v1-model", "--json")
    assert shown.returncode == 0, shown.stderr
    shown = json.loads(shown.stdout)
    assert shown["run_params"]["final_status"] == "succeeded"
    assert shown["model"] == {"calls": 1, "replayed": 0, "input_tokens": 12, "output_tokens": 7,
                              "saved_input_tokens": 0, "saved_output_tokens": 0}


def test_a_new_pod_finishes_the_waiting_run_beside_the_old_results(serve_factory, tmp_path,
                                                                   git_daemon):
    load_fixture(git_daemon)
    before = {run_id: git(git_daemon.bare, "rev-parse", f"refs/inflight-results/{run_id}")
              for run_id in FINISHED}
    pod = tmp_path / "pod-b"
    pod.mkdir()
    config = tmp_path / "config.json"  # the fixture's runs name the template "demo"
    config.write_text(json.dumps({"children": {"demo": demo_child(1)}}))
    serve = serve_factory("--pod-name", "pod-b", "--results-repo", git_daemon.url,
                          "--config", str(config), "--checkpoint-interval", "500ms", workdir=pod)
    serve.wait_log(lambda e: e.get("msg") == "checkpoint branch deleted" and
                   e.get("run_id") == "v1-live", 60)

    rows, _ = listed(tmp_path, git_daemon)
    assert rows["v1-live"]["state"] == "succeeded" and rows["v1-live"]["records"] == 50
    assert rows["v1-live"]["pod"] == "pod-b"
    for run_id, tip in before.items():
        assert git(git_daemon.bare, "rev-parse", f"refs/inflight-results/{run_id}") == tip
    started = [e["run_id"] for e in serve.events() if e.get("msg") == "attempt started"]
    assert started == ["v1-live"], started


def test_migrate_copies_the_index_into_the_log_and_folds_the_results(serve_factory, tmp_path,
                                                                     git_daemon):
    load_fixture(git_daemon)
    operator = tmp_path / "operator"
    operator.mkdir()
    before, _ = listed(operator, git_daemon)
    flat = git(git_daemon.bare, "rev-parse", "refs/heads/inflight-index")
    dry = runs(operator, git_daemon, "migrate", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would copy 3 index entries" in dry.stdout and "fold 2 results" in dry.stdout
    assert not git(git_daemon.bare, "for-each-ref", "refs/heads/inflight-runs-log",
                   "refs/inflight-archive/")

    # A server that refuses the archive: no entry reaches the log before its result is folded.
    hook = Path(git_daemon.bare) / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\ngrep -q ' refs/inflight-archive/' && "
                    "{ echo 'no archive here' >&2; exit 1; }\nexit 0\n")
    hook.chmod(0o755)
    refused = runs(operator, git_daemon, "migrate")
    assert refused.returncode == 1 and "not updated" in refused.stderr, refused.stderr
    assert not git(git_daemon.bare, "for-each-ref", "refs/heads/inflight-runs-log")
    hook.unlink()

    done = runs(operator, git_daemon, "migrate")
    assert done.returncode == 0, done.stderr
    assert "copied 3 index entries" in done.stdout and "folded 2 results" in done.stdout
    assert "not-a-run.json" in done.stderr  # the hostile file is named, and left
    lines = [json.loads(line) for line in git(
        git_daemon.bare, "show", "refs/heads/inflight-runs-log:entries.jsonl").splitlines()]
    commits = {line["id"]: line.get("result_commit") for line in lines}
    assert commits == {"v1-done-a": git(git_daemon.bare, "rev-parse",
                                        "refs/inflight-results/v1-done-a").strip(),
                       "v1-model": git(git_daemon.bare, "rev-parse",
                                       "refs/inflight-results/v1-model").strip(),
                       "v1-done-b": None}, commits
    after, _ = listed(operator, git_daemon)
    assert after == before  # every field, the model's calls too
    fold = git(git_daemon.bare, "rev-list", "--parents", "-1",
               "refs/inflight-archive/results").split()
    results = [git(git_daemon.bare, "rev-parse", f"refs/inflight-results/{run_id}").strip()
               for run_id in FINISHED]
    assert len(fold) == 4 and all(result in fold for result in results), fold
    # Every entry copied has its markers in the fold's tree, the one without a result ref too:
    # a lookup finds the run.
    folded = git(git_daemon.bare, "ls-tree", "-r", "--name-only",
                 "refs/inflight-archive/results").split("\n")
    for run_id in [*FINISHED, "v1-done-b"]:
        assert any(path.startswith(f"{run_id}/") and path.endswith(f"/inflight published {run_id}")
                   for path in folded), (run_id, folded)
    git(git_daemon.bare, "fsck", "--strict", "--no-dangling")
    # `inflight run` of it on an empty disk looks it up instead of reading the log: published,
    # so nothing runs (its child would fail), and it exits 0 for its status.
    job = subprocess.run(
        [str(INFLIGHT), "run", "--id", "v1-done-b", "--pod-name", "job-1", "--results-repo",
         git_daemon.url, "--runs-dir", str(tmp_path / "job" / "runs"), "--log-format", "json",
         "--", "false"], env={k: v for k, v in os.environ.items() if not k.startswith("INFLIGHT_")},
        capture_output=True, text=True, timeout=60)
    assert job.returncode == 0 and "finished and published" in job.stdout + job.stderr, \
        job.stdout + job.stderr
    assert git(git_daemon.bare, "rev-parse", "refs/heads/inflight-index") == flat
    again = runs(operator, git_daemon, "migrate")
    assert again.returncode == 0 and "copied 0 index entries" in again.stdout, again.stdout
    # A run the log removed (a prune whose flat-index update was lost) is neither listed nor
    # copied back, though layout 1's file of it is still there.
    removal = '{"id":"v1-done-b","removed":true}\n'
    git(git_daemon.bare, "fast-import", "--quiet", input=(
        "commit refs/heads/inflight-runs-log\ncommitter t <t@t> 1700000000 +0000\ndata 8\n"
        "removal\nfrom refs/heads/inflight-runs-log^0\nM 644 inline entries.jsonl\n"
        f"data {len(removal)}\n{removal}\n"))
    assert "v1-done-b" not in listed(operator, git_daemon)[0]
    again = runs(operator, git_daemon, "migrate")
    assert again.returncode == 0 and "copied 0 index entries" in again.stdout, again.stdout

    # A pod goes on: it finishes the waiting run into the log, and leaves the flat index.
    config = tmp_path / "config.json"  # the fixture's runs name the template "demo"
    config.write_text(json.dumps({"children": {"demo": demo_child(1)}}))
    pod_b = tmp_path / "pod-b"
    pod_b.mkdir()
    serve = serve_factory("--pod-name", "pod-b", "--results-repo", git_daemon.url,
                          "--config", str(config), "--checkpoint-interval", "500ms", workdir=pod_b)
    serve.wait_log(lambda e: e.get("msg") == "checkpoint branch deleted" and
                   e.get("run_id") == "v1-live", 60)
    assert git(git_daemon.bare, "rev-parse", "refs/heads/inflight-index") == flat
    rows, _ = listed(operator, git_daemon)
    assert rows["v1-live"]["state"] == "succeeded" and rows["v1-live"]["pod"] == "pod-b"
    # Another pod answers a submit of either published run from its entry, starting nothing.
    pod_c = tmp_path / "pod-c"
    pod_c.mkdir()
    fresh = serve_factory("--pod-name", "pod-c", "--results-repo", git_daemon.url,
                          "--config", str(config), workdir=pod_c)
    fresh.wait_ready()
    for run_id in ("v1-live", "v1-done-a"):
        again = fresh.post("/api/eval/run", {"id": run_id, "template": "demo"})
        assert again.status == 200 and again.json()["status"] == "succeeded", again.body
    assert not [e for e in fresh.events() if e.get("msg") == "attempt started"]
