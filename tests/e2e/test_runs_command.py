"""`inflight runs list|show|logs|prune` from an empty directory with only
--results-repo (docs/results.md "Every run of the fleet: `inflight runs`"): published, live and
waiting runs of several pods, the index read and a bad index file skipped."""
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from inflight_testing.git_servers import git
from inflight_testing.waiting import wait_for
from conftest import INFLIGHT


def runs(workdir, server, *args):
    """`inflight runs ARGS --results-repo URL`, with no INFLIGHT_* variable and no config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFLIGHT_")}
    return subprocess.run([str(INFLIGHT), "runs", *args, "--results-repo", server.url,
                           *server.flags], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=60)


# A tick every 500 ms: each starts a checkpoint agent, and at 100 ms a
# sanitized serve ran them back to back (a core, all the test long) for no
# step the test waits on.
def start(serve_factory, workdir, server, pod, *flags):
    workdir.mkdir()
    serve = serve_factory("--pod-name", pod, "--results-repo", server.url, *server.flags,
                          "--checkpoint-interval", "500ms", *flags, workdir=workdir)
    serve.wait_ready()
    return serve


def published(serve, **params):
    """A run submitted to `serve` that finished, was published, and lost its branch."""
    run_id = serve.submit(**params)
    serve.wait_log(lambda e: e.get("msg") == "checkpoint branch deleted" and
                   e.get("run_id") == run_id, 30)
    return run_id


def pushed(serve, run_id):
    serve.wait_log(lambda e: e.get("msg") == "checkpoint pushed" and e.get("run_id") == run_id, 30)


def listed(operator, server, *args):
    r = runs(operator, server, "list", "--json", *args)
    assert r.returncode == 0, r.stderr
    return {row["id"]: row for row in json.loads(r.stdout)["runs"]}, r.stderr


def test_runs_list_shows_every_run_of_the_fleet(serve_factory, tmp_path, git_daemon):
    operator = tmp_path / "operator"
    operator.mkdir()
    pod_a = start(serve_factory, tmp_path / "pod-a", git_daemon, "pod-a")
    done = [pod_a.submit(tests=3, test_ms=1) for _ in range(2)]
    for run_id in done:
        pod_a.wait_log(lambda e, r=run_id: e.get("msg") == "checkpoint branch deleted" and
                       e.get("run_id") == r, 30)
    live = pod_a.submit(tests=2000, test_ms=50)
    pushed(pod_a, live)
    pod_c = start(serve_factory, tmp_path / "pod-c", git_daemon, "pod-c")
    waiting = pod_c.submit(tests=2000, test_ms=50)
    pushed(pod_c, waiting)
    pod_c.signal(signal.SIGTERM)
    assert pod_c.wait_exit(timeout=30) == 0

    rows, _ = listed(operator, git_daemon)
    assert sorted(rows) == sorted(done + [live, waiting])
    for run_id in done:
        row = rows[run_id]
        assert row["state"] == "succeeded" and row["pod"] == "pod-a"
        assert row["attempts"] == 1 and row["records"] == 3 and row["finished_at"]
        assert row["where"] == f"refs/inflight-results/{run_id}"
    assert rows[live]["state"] == "live" and rows[live]["pod"] == "pod-a"
    assert rows[live]["where"] == f"inflight/pod-a/{live}" and rows[live]["last_checkpoint_at"]
    assert rows[waiting]["state"] == "waiting" and rows[waiting]["interruptions"] == 1
    assert rows[waiting]["failures"] == 0
    assert sorted(listed(operator, git_daemon, "--state", "succeeded")[0]) == sorted(done)

    table = runs(operator, git_daemon, "list")
    assert table.returncode == 0 and "STATE" in table.stdout and live in table.stdout

    shown = runs(operator, git_daemon, "show", done[0], "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["run_params"]["final_status"] == "succeeded"
    logs = runs(operator, git_daemon, "logs", done[0])
    assert logs.returncode == 0, logs.stderr
    assert "all 3 tests done" in logs.stdout
    unknown = runs(operator, git_daemon, "show", "no-such-run")
    assert unknown.returncode == 4 and "no-such-run" in unknown.stderr


def test_a_bad_index_file_is_skipped_and_prune_deletes_a_result(serve_factory, tmp_path,
                                                                git_daemon):
    operator = tmp_path / "operator"
    operator.mkdir()
    pod_a = start(serve_factory, tmp_path / "pod-a", git_daemon, "pod-a", "--results-layout", "1")
    kept, pruned = pod_a.submit(tests=2, test_ms=1), pod_a.submit(tests=2, test_ms=1)
    for run_id in (kept, pruned):
        pod_a.wait_log(lambda e, r=run_id: e.get("msg") == "checkpoint branch deleted" and
                       e.get("run_id") == r, 30)
    # Someone with push access adds a file that is not an index entry.
    clone = tmp_path / "clone"
    git(None, "clone", "-q", "-b", "inflight-index", git_daemon.cli_url, clone)
    (clone / "runs" / "bogus.json").write_text('{"id": "../../etc"}')
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "hostile")
    git(clone, "push", "-q", "origin", "inflight-index")

    rows, stderr = listed(operator, git_daemon)
    assert sorted(rows) == sorted([kept, pruned])
    assert "bogus.json" in stderr
    # pod-a looks at the store every 500 ms and says so once, not every look.
    def warned():
        return sum(e.get("msg") == "checkpoint not restored" and "bogus.json" in e["error"]
                   for e in pod_a.events())

    wait_for(warned, 10, "pod-a's warning about the bad index file")
    looks = git_daemon.process.output().count("Request upload-pack")
    wait_for(lambda: git_daemon.process.output().count("Request upload-pack") >= looks + 3, 10,
             "three more looks of pod-a")
    assert warned() == 1

    # --older-than 1d: both finished seconds ago, nothing to delete.
    r = runs(operator, git_daemon, "prune", "--older-than", "1d")
    assert r.returncode == 0 and "deleted" not in r.stdout, r.stdout + r.stderr
    # --dry-run names what it would delete and deletes nothing.
    r = runs(operator, git_daemon, "prune", "--older-than", "0s", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == sorted(["would", "delete", kept, "would", "delete", pruned])
    assert len(git(git_daemon.bare, "for-each-ref", "refs/inflight-results/").splitlines()) == 2

    r = runs(operator, git_daemon, "prune", "--run-id", pruned)
    assert r.returncode == 0, r.stderr
    assert f"deleted {pruned}" in r.stdout
    rows, _ = listed(operator, git_daemon)
    assert sorted(rows) == [kept]
    assert not git(git_daemon.bare, "for-each-ref", f"refs/inflight-results/{pruned}")
    assert runs(operator, git_daemon, "prune").returncode == 2


def runs_bucket(run_id):
    """The low byte of the id's 64-bit FNV-1a, as core's runs_bucket."""
    h = 14695981039346656037
    for c in run_id.encode():
        h = ((h ^ c) * 1099511628211) % 2**64
    return "%02x" % (h & 0xFF)


def entry_line(run_id, records):
    return json.dumps({"id": run_id, "final_status": "succeeded", "pod": "pod-a", "attempts": [],
                       "records": records, "total": records, "created_at": "2026-11-29T01:00:00Z",
                       "finished_at": None, "result": f"refs/inflight-results/{run_id}"},
                      separators=(",", ":")) + "\n"


def commit(ref, files):
    """A fast-import commit on `ref` holding `files` (path: text)."""
    out = f"commit {ref}\ncommitter t <t@t> 1700000000 +0000\ndata 2\nc\n"
    for path, text in files.items():
        data = text.encode()
        out += f"M 644 inline {path}\ndata {len(data)}\n{text}\n"
    return out + "\n"


LAYOUT_2 = {"layout": "inflight-runs 2\n"}


def test_a_listing_of_an_unchanged_repo_prints_the_last_one_again(serve_factory, tmp_path,
                                                                  git_daemon):
    """`runs list` keeps its output beside the cache repo: the next one with the same flags, on a
    repo whose refs did not move, prints it without reading an entry (a word planted in it shows
    it came from there); a ref that moved, other flags, or a damaged file make a new listing."""
    operator = tmp_path / "operator"
    operator.mkdir()
    pod = start(serve_factory, tmp_path / "pod-a", git_daemon, "pod-a")
    first = published(pod, tests=2, test_ms=1)
    pod.signal(signal.SIGTERM)
    assert pod.wait_exit(timeout=30) == 0
    kept = operator / ".inflight" / "cache.git" / "inflight-runs-list"
    planted = "x" * len(first)  # the same length: the file counts its output's bytes

    def plant():
        kept.write_bytes(kept.read_bytes().replace(first.encode(), planted.encode()))

    assert sorted(listed(operator, git_daemon)[0]) == [first]
    assert kept.read_bytes().startswith(b"inflight runs list cache 1\n")
    plant()
    assert sorted(listed(operator, git_daemon)[0]) == [planted]
    table = runs(operator, git_daemon, "list")  # other flags: listed anew, and kept
    assert table.returncode == 0 and first in table.stdout, table.stdout + table.stderr
    plant()
    assert planted in runs(operator, git_daemon, "list").stdout

    good = kept.read_bytes()
    kept.write_bytes(good[:-1])  # cut short: no cache
    assert first in runs(operator, git_daemon, "list").stdout
    kept.write_bytes(good.replace(b"problems 0\n", b"problems 0x\n"))
    assert first in runs(operator, git_daemon, "list").stdout

    # A lease renewed (a new tip of the lease ref) changes no row.
    lease = "refs/heads/inflight-lease/pod-z"
    empty = git(git_daemon.bare, "hash-object", "-t", "tree", "-w", "/dev/null").strip()
    for message in ("taken", "renewed"):
        git(git_daemon.bare, "update-ref", lease,
            git(git_daemon.bare, "commit-tree", empty, "-m", message).strip())
        if message == "taken":
            assert first in runs(operator, git_daemon, "list").stdout  # a new ref: listed anew
            plant()
    assert planted in runs(operator, git_daemon, "list").stdout

    pod = start(serve_factory, tmp_path / "pod-b", git_daemon, "pod-b")  # its lease, a new ref
    second = published(pod, tests=2, test_ms=1)
    assert sorted(listed(operator, git_daemon)[0]) == sorted([first, second])


def test_runs_list_reads_layout_2s_index(tmp_path, git_daemon):
    """A repo with layout 2's snapshot and log (docs/design/history-layout.md §3) lists their
    runs, the log's lines over the snapshot's; a bad line is named and left out."""
    operator = tmp_path / "operator"
    operator.mkdir()
    layout = LAYOUT_2
    stream = commit("refs/heads/inflight-runs", {
        **layout, f"b/{runs_bucket('r-1')}/000001.jsonl": entry_line("r-1", 1),
        f"b/{runs_bucket('r-2')}/000001.jsonl": entry_line("r-2", 2)})
    stream += commit("refs/heads/inflight-runs-log", layout)
    stream += commit("refs/heads/inflight-runs-log", {"entries.jsonl": (
        entry_line("r-3", 3) + entry_line("r-1", 9) + '{"id":"r-2","removed":true}\n' +
        '{"id":"../x","removed":true}\n')})
    git(git_daemon.bare, "fast-import", "--quiet", input=stream)

    rows, stderr = listed(operator, git_daemon)
    assert sorted(rows) == ["r-1", "r-3"], stderr
    assert rows["r-1"]["records"] == 9 and rows["r-3"]["state"] == "succeeded"
    assert rows["r-3"]["where"] == "refs/inflight-results/r-3"
    assert "entries.jsonl line 4" in stderr and "removal" in stderr
    assert listed(operator, git_daemon, "--state", "live")[0] == {}


def test_a_new_repo_starts_in_layout_2(serve_factory, tmp_path, git_daemon):
    """A results repo with no published run gets layout 2 (docs/results.md "The history layout"):
    serve's first publish starts the log with the run's entry, with its result's commit, and never
    writes `inflight-index`; `runs list` shows the run. The branch's deletion folds the result
    into the archive, on its genesis marker, with the run's status marker; `runs prune` takes the
    entry out of the log with a removal line."""
    operator = tmp_path / "operator"
    operator.mkdir()
    pod = start(serve_factory, tmp_path / "pod-a", git_daemon, "pod-a")
    run_id = published(pod, tests=2, test_ms=1)
    log = git(git_daemon.bare, "rev-list", "refs/heads/inflight-runs-log").split()
    assert len(log) == 2, log
    line = json.loads(git(git_daemon.bare, "show", f"{log[0]}:entries.jsonl"))
    result = git(git_daemon.bare, "rev-parse", f"refs/inflight-results/{run_id}").strip()
    assert line["id"] == run_id and line["result_commit"] == result, line
    assert not git(git_daemon.bare, "for-each-ref", "refs/heads/inflight-index")
    rows, stderr = listed(operator, git_daemon)
    assert rows[run_id]["state"] == "succeeded", stderr

    fold = git(git_daemon.bare, "rev-list", "--parents", "-1",
               "refs/inflight-archive/results").split()
    assert len(fold) == 3 and fold[2] == result, fold
    assert git(git_daemon.bare, "log", "-1", "--format=%B", fold[1]).strip() == "inflight archive"
    markers = git(git_daemon.bare, "ls-tree", "-r", "refs/inflight-archive/results").splitlines()
    assert markers == [f"160000 commit {fold[1]}\t.archive/inflight archive",
                       f"160000 commit {fold[1]}\t{run_id}/succeeded/inflight published {run_id}"], \
        markers
    git(git_daemon.bare, "fsck", "--strict", "--no-dangling")

    r = runs(operator, git_daemon, "prune", "--run-id", run_id)
    assert r.returncode == 0 and f"deleted {run_id}" in r.stdout, r.stdout + r.stderr
    assert listed(operator, git_daemon)[0] == {}
    removal = json.loads(git(git_daemon.bare, "show", "refs/heads/inflight-runs-log:entries.jsonl"))
    assert removal == {"id": run_id, "removed": True}, removal


def test_runs_compact_rewrites_the_log_as_few_commits(serve_factory, tmp_path, git_daemon):
    """Each publish adds a commit to layout 2's log. `runs compact` rewrites it as a new root and
    one commit of the last line of each run it lists or removed, as written (a field of a newer
    release included): `runs list` lists the same runs, a pruned run stays out, and the next
    publish adds its commit to the new log. A log compact already is left as it is."""
    log = "refs/heads/inflight-runs-log"
    pod = start(serve_factory, tmp_path / "pod-a", git_daemon, "pod-a")
    ids = [published(pod, tests=2, test_ms=1) for _ in range(3)]
    operator = tmp_path / "operator"
    operator.mkdir()
    r = runs(operator, git_daemon, "prune", "--run-id", ids[0])
    assert r.returncode == 0, r.stderr
    # A pod of a newer release wrote ids[1]'s entry again, with a field this one does not know.
    written = {}
    for commit in git(git_daemon.bare, "rev-list", log).split()[:-1]:
        for text in git(git_daemon.bare, "show", f"{commit}:entries.jsonl").splitlines():
            written.setdefault(json.loads(text)["id"], text)
    newer = written[ids[1]][:-1] + ',"from_a_newer_release":{"kept":[1,2]}}'
    (tmp_path / "newer.jsonl").write_text(newer + "\n")
    blob = git(git_daemon.bare, "hash-object", "-w", str(tmp_path / "newer.jsonl")).strip()
    tree = git(git_daemon.bare, "mktree", input=f"100644 blob {blob}\tentries.jsonl\n").strip()
    delta = git(git_daemon.bare, "commit-tree", "-p", log, "-m", "inflight runs: 1 lines",
                tree).strip()
    git(git_daemon.bare, "update-ref", log, delta)
    tip = git(git_daemon.bare, "rev-parse", log).strip()
    assert git(git_daemon.bare, "rev-list", "--count", log).strip() == "6"  # root, 3, prune, newer
    before, _ = listed(operator, git_daemon)
    assert sorted(before) == sorted(ids[1:]), before

    dry = runs(operator, git_daemon, "compact", "--dry-run")
    assert dry.returncode == 0 and "lists 2 runs and 1 removed in 5 commits; it would take 1" \
        in dry.stdout, dry.stdout + dry.stderr
    assert git(git_daemon.bare, "rev-parse", log).strip() == tip
    done = runs(operator, git_daemon, "compact")
    assert done.returncode == 0 and "it now takes 1" in done.stdout, done.stdout + done.stderr
    assert git(git_daemon.bare, "rev-list", "--count", log).strip() == "2"
    lines = git(git_daemon.bare, "show", f"{log}:entries.jsonl").splitlines()
    assert {json.loads(line)["id"]: json.loads(line).get("removed", False) for line in lines} == \
        {ids[0]: True, ids[1]: False, ids[2]: False}, lines
    assert newer in lines and written[ids[2]] in lines, lines  # byte for byte
    fresh_dir = tmp_path / "operator-2"
    fresh_dir.mkdir()
    after, _ = listed(fresh_dir, git_daemon)
    assert after == before
    again = runs(operator, git_daemon, "compact")
    assert again.returncode == 0 and "compact already" in again.stdout, again.stdout

    published(pod, tests=2, test_ms=1)
    assert git(git_daemon.bare, "rev-list", "--count", log).strip() == "3"
    git(git_daemon.bare, "fsck", "--strict", "--no-dangling")


# The shortest retention a pod takes: a git step's deadline (docs/results.md "The history layout").
RETAIN_BRIEFLY = ("--git-timeout", "8s", "--results-ref-retention", "8s")


def unreffing_pod(serve_factory, tmp_path, git_daemon):
    """pod-a on a new repo, layout 2, whose server serves markers by id, with the shortest
    retention."""
    git(git_daemon.bare, "config", "uploadpack.allowReachableSHA1InWant", "true")
    pod_a = tmp_path / "pod-a"
    pod_a.mkdir()
    serve = serve_factory("--pod-name", "pod-a", "--results-repo", git_daemon.url,
                          "--checkpoint-interval", "500ms", *RETAIN_BRIEFLY, workdir=pod_a)
    serve.wait_ready()
    return serve


def test_a_fold_declined_with_another_ref_then_goes_alone(serve_factory, tmp_path, git_daemon):
    """Once the server took a fold from a pod, the next one rides a push. A hook that declines
    that push for another ref (here a run branch's deletion) declines the fold with it; the fold
    then goes in a push of its own and lands: no result is left out of the archive."""
    serve = unreffing_pod(serve_factory, tmp_path, git_daemon)
    archive = "refs/inflight-archive/results"
    published(serve, tests=2, test_ms=1)
    wait_for(lambda: git(git_daemon.bare, "for-each-ref", archive), 30, "the first fold")
    hook = Path(git_daemon.bare) / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\ngrep -q '^[0-9a-f]* 0\\{40\\} refs/heads/inflight/' && "
                    "{ echo 'branches stay' >&2; exit 1; }\nexit 0\n")
    hook.chmod(0o755)
    second = serve.submit(tests=2, test_ms=1)
    serve.wait_log(lambda e: "not deleted; will retry" in e.get("msg", "") and
                   e.get("run_id") == second, 60)
    result = git(git_daemon.bare, "rev-parse", f"refs/inflight-results/{second}").strip()
    wait_for(lambda: result in git(git_daemon.bare, "rev-list", archive).split(), 30,
             "the second run's result folded")


def test_a_folded_result_ref_goes_once_its_retention_passed(serve_factory, tmp_path, git_daemon):
    """Layout 2's unref (docs/results.md "The history layout"): the push of the pod that folded a
    run, once --results-ref-retention passed, deletes its result ref. The run stays published:
    `runs list` lists it, `runs show` and `runs logs` fetch its result by id from the archive,
    and a pod on an empty disk answers a submit of it with its status, starting nothing."""
    serve = unreffing_pod(serve_factory, tmp_path, git_daemon)
    run_id = published(serve, tests=2, test_ms=1)
    line = json.loads(git(git_daemon.bare, "show", "refs/heads/inflight-runs-log:entries.jsonl"))
    result = line["result_commit"]
    serve.submit(tests=600, test_ms=100)  # a run whose checkpoints are the pushes after it
    wait_for(lambda: not git(git_daemon.bare, "for-each-ref", f"refs/inflight-results/{run_id}"),
             60, "the result ref deleted")
    assert result in git(git_daemon.bare, "rev-list", "refs/inflight-archive/results").split()
    git(git_daemon.bare, "fsck", "--strict", "--no-dangling")

    operator = tmp_path / "operator"
    operator.mkdir()
    rows, stderr = listed(operator, git_daemon)
    assert rows[run_id]["state"] == "succeeded", stderr
    shown = runs(operator, git_daemon, "show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    assert "refs/inflight-archive/results" in json.loads(shown.stdout)["where"], shown.stdout
    logs = runs(operator, git_daemon, "logs", run_id)
    assert logs.returncode == 0 and logs.stdout, logs.stderr

    pod_b = tmp_path / "pod-b"
    pod_b.mkdir()
    fresh = serve_factory("--pod-name", "pod-b", "--results-repo", git_daemon.url, workdir=pod_b)
    fresh.wait_ready()
    again = fresh.post("/api/eval/run", {"id": run_id})
    assert again.status == 200 and again.json()["status"] == "succeeded", again.body
    assert not [e for e in fresh.events() if e.get("msg") == "attempt started"]
    # The pod's start and the submit read no entry: they looked the run up in the archive.
    log_tip = git(git_daemon.bare, "rev-parse", "refs/heads/inflight-runs-log").strip()
    cache = pod_b / ".inflight" / "cache.git"
    assert cache.is_dir()
    assert subprocess.run(["git", "-C", str(cache), "cat-file", "-e", log_tip]).returncode != 0

    # `inflight run` of it on an empty disk reads no entry: it looks the run up in the archive,
    # with its status, and runs nothing (its child would fail).
    job = subprocess.run(
        [str(INFLIGHT), "run", "--id", run_id, "--pod-name", "job-1", "--results-repo",
         git_daemon.url, "--runs-dir", str(tmp_path / "job" / "runs"), "--log-format", "json",
         "--", "false"], env={k: v for k, v in os.environ.items() if not k.startswith("INFLIGHT_")},
        capture_output=True, text=True, timeout=60)
    found = [json.loads(line) for line in job.stdout.splitlines() + job.stderr.splitlines()
             if "finished and published" in line]
    assert job.returncode == 0 and found, job.stdout + job.stderr
    assert found[0]["final_status"] == "succeeded", found

    # A server that stops serving markers by id cannot tell: a new run id waits, and runs nothing.
    git(git_daemon.bare, "config", "uploadpack.allowReachableSHA1InWant", "false")
    unsure = fresh.post("/api/eval/run", {"id": "r-new-after"})
    assert unsure.status == 503 and unsure.json()["error"] == "cannot_check", unsure.body
    assert not [e for e in fresh.events() if e.get("msg") == "attempt started"]


def test_a_prune_builds_the_archive_again_without_the_pruned_results(serve_factory, tmp_path,
                                                                     git_daemon):
    """Layout 2's archive keeps every folded result reachable, the only ref of one whose result ref
    went. `runs prune` replaces it, in its one push, by folds of every other published run, and
    sends none of their results again: the server's gc then deletes the pruned result and keeps
    the others. A prune of every run leaves a fold of none, which lookups still need, and a pod
    publishes again after the gc."""
    archive = "refs/inflight-archive/results"
    git(git_daemon.bare, "config", "receive.fsckObjects", "true")  # a stub's bytes would fail
    pod = unreffing_pod(serve_factory, tmp_path, git_daemon)
    kept, pruned = published(pod, tests=2, test_ms=1), published(pod, tests=2, test_ms=1)
    results = {run_id: git(git_daemon.bare, "rev-parse", f"refs/inflight-results/{run_id}").strip()
               for run_id in (kept, pruned)}
    pod.submit(tests=600, test_ms=100)  # a run whose checkpoints are the pushes after them
    wait_for(lambda: not git(git_daemon.bare, "for-each-ref", f"refs/inflight-results/{kept}"),
             60, "the kept run's result ref deleted")
    pod.stop()  # no fold of its own after the prune's

    operator = tmp_path / "operator"
    operator.mkdir()
    r = runs(operator, git_daemon, "prune", "--run-id", pruned)
    assert r.returncode == 0 and f"deleted {pruned}" in r.stdout, r.stdout + r.stderr
    reached = git(git_daemon.bare, "rev-list", "--objects", archive)
    assert results[kept] in reached and results[pruned] not in reached, reached
    assert git(git_daemon.bare, "ls-tree", "--name-only", archive).split() == [".archive", kept]
    git(git_daemon.bare, "gc", "--quiet", "--prune=now")
    for run_id, stored in ((kept, True), (pruned, False)):
        found = subprocess.run(["git", "-C", str(git_daemon.bare), "cat-file", "-e",
                                results[run_id]], capture_output=True).returncode == 0
        assert found == stored, run_id
    git(git_daemon.bare, "fsck", "--strict", "--no-dangling")
    rows = listed(operator, git_daemon)[0]
    assert sorted(i for i, row in rows.items() if row["state"] == "succeeded") == [kept], rows

    r = runs(operator, git_daemon, "prune", "--run-id", kept)
    assert r.returncode == 0 and f"deleted {kept}" in r.stdout, r.stdout + r.stderr
    assert git(git_daemon.bare, "ls-tree", "--name-only", archive).split() == [".archive"]
    git(git_daemon.bare, "gc", "--quiet", "--prune=now")
    pod_b = tmp_path / "pod-b"
    again = start(serve_factory, pod_b, git_daemon, "pod-b")
    fresh = published(again, tests=2, test_ms=1)
    wait_for(lambda: fresh in git(git_daemon.bare, "ls-tree", "--name-only", archive).split(), 30,
             "a new run folded")


# What a server's hook declines: every push that deletes a result ref (the unref), or that
# updates the archive (the fold).
DECLINED = {"unref": "^[0-9a-f]* 0\\{40\\} refs/inflight-results/",
            "fold": " refs/inflight-archive/"}


@pytest.mark.parametrize("declined_step", sorted(DECLINED))
def test_a_refused_unref_or_fold_refuses_nothing_else(serve_factory, tmp_path, git_daemon,
                                                      declined_step):
    """A server whose hook declines every push that deletes a result ref, or that moves the
    archive: the unref and the fold each go in a push of their own, so the pod's checkpoints (and
    the lease, in the same pushes) go on landing, the ref stays, and the pod does not ask again."""
    declined = tmp_path / "declined"
    hook = Path(git_daemon.bare) / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\ngrep -q '{DECLINED[declined_step]}' && "
                    f"{{ echo declined >> '{declined}'; echo 'results stay' >&2; exit 1; }}\n"
                    "exit 0\n")
    hook.chmod(0o755)
    serve = unreffing_pod(serve_factory, tmp_path, git_daemon)
    run_id = published(serve, tests=2, test_ms=1)
    second = serve.submit(tests=600, test_ms=100)
    branch = f"refs/heads/inflight/pod-a/{second}"
    tips = set()
    wait_for(lambda: tips.add(git(git_daemon.bare, "for-each-ref", "--format=%(objectname)",
                                  branch).strip()) or len(tips - {""}) >= 4,
             60, "four checkpoints of the second run")
    wait_for(declined.exists, 60, "the unref declined")
    tips.clear()
    wait_for(lambda: tips.add(git(git_daemon.bare, "for-each-ref", "--format=%(objectname)",
                                  branch).strip()) or len(tips) >= 4,
             60, "four checkpoints of the second run after it")
    assert git(git_daemon.bare, "for-each-ref", f"refs/inflight-results/{run_id}")
    assert declined.read_text() == "declined\n"  # asked once, not at every push
    archive = git(git_daemon.bare, "for-each-ref", "refs/inflight-archive/")
    assert bool(archive) == (declined_step == "unref"), archive
