"""A finished run's results outlive its pod (docs/results.md): its final run dir is published as plain files on
refs/inflight-results/<run-id>, with one entry in the results index,
before its checkpoint branch is deleted; a run that was published never runs
again; a final branch an earlier release left is published by the next start."""
import json
import os
import signal
import subprocess
import time

from inflight_testing.git_servers import branches, git
from inflight_testing.results_index import FLAT, LOG, has_index, has_ref, index_entries, index_entry
from inflight_testing.waiting import wait_for
from conftest import DEMO, INFLIGHT, PYTHON, write_config
from test_finished_runs import refuse_deletions
from test_operator_commands import checkpoints
from test_resume_command import resume
from test_runs_command import runs


# A tick every 500 ms: each starts a checkpoint agent, and at 100 ms a
# sanitized serve ran them back to back (a core, all the test long) for no
# step the test waits on.
def start(serve_factory, workdir, server, *args, pod="pod-a"):
    workdir.mkdir(exist_ok=True)
    serve = serve_factory("--pod-name", pod, "--results-repo", server.url, *server.flags,
                          "--checkpoint-interval", "500ms", *args, workdir=workdir)
    serve.wait_ready()
    return serve


def refs(bare, prefix):
    out = git(bare, "for-each-ref", "--format=%(refname)", prefix)
    return set(out.split())


def result_of(server, run_id):
    return f"refs/inflight-results/{run_id}"


def fetched_result(server, tmp_path, run_id):
    """A fresh clone that fetched only the run's result ref, as a user would."""
    clone = tmp_path / f"clone-{run_id}"
    git(None, "init", "-q", clone)
    ref = result_of(server, run_id)
    git(clone, "fetch", "-q", server.cli_url, f"{ref}:{ref}", env=server.env)
    return clone, ref


def assert_every_record_once(text, tests):
    ids = [json.loads(line)["test_id"] for line in text.splitlines()]
    assert len(ids) == tests and len(set(ids)) == tests, (len(ids), len(set(ids)))


def wait_branch_deleted(serve, run_id, timeout=60):
    serve.wait_log(lambda e: e.get("msg") == "checkpoint branch deleted" and
                   e.get("run_id") == run_id, timeout)


def run_dir(workdir, run_id):
    return workdir / ".inflight" / "runs" / run_id


def tree(repo, ref):
    return git(repo, "ls-tree", "-r", "--name-only", ref).split()


def chunked(bare, branch, name):
    """Whether the branch exists and its tip holds `name` as chunks."""
    return branch in refs(bare, branch) and any(
        entry.startswith(f"{name}.inflight-chunks/") for entry in tree(bare, branch))


def params_at(repo, ref):
    return json.loads(git(repo, "show", f"{ref}:run-params.json"))


def test_a_finished_run_is_published_as_plain_files_and_its_branch_deleted(
        serve_factory, tmp_path, git_daemon):
    # 800 records are over 64 KiB: the checkpoints chunk index.jsonl.
    serve = start(serve_factory, tmp_path / "pod-a", git_daemon)
    run_id = serve.submit(tests=800, test_ms=1)
    serve.wait_status(run_id, "succeeded", timeout=60)
    wait_branch_deleted(serve, run_id)
    assert not branches(git_daemon.bare)
    assert refs(git_daemon.bare, "refs/inflight-results/") == {result_of(git_daemon, run_id)}

    clone, ref = fetched_result(git_daemon, tmp_path, run_id)
    assert_every_record_once(git(clone, "show", f"{ref}:index.jsonl"), 800)
    tree = git(clone, "ls-tree", "-r", "--name-only", ref).split()
    assert not [name for name in tree if "inflight-chunks" in name], tree
    params = json.loads(git(clone, "show", f"{ref}:run-params.json"))
    assert params["final_status"] == "succeeded"
    # The result's parent is the run's final checkpoint.
    assert "(final)" in git(clone, "log", "-1", "--format=%s", f"{ref}^")

    entry = index_entry(git_daemon.bare, run_id)
    assert entry["id"] == run_id and entry["final_status"] == "succeeded"
    assert entry["records"] == 800 and entry["total"] == 800 and entry["result"] == ref
    assert [a["outcome"] for a in entry["attempts"]] == ["succeeded"]
    assert entry["pod"] == "pod-a" and entry["finished_at"]
    assert "\ninflight_results_published_total 1\n" in serve.get("/metrics").body


def test_a_cancelled_run_is_published_as_cancelled(serve_factory, tmp_path, git_daemon):
    serve = start(serve_factory, tmp_path / "pod-a", git_daemon)
    run_id = serve.submit(tests=1000, test_ms=20)
    wait_for(lambda: serve.status(run_id)["progress"]["records"] >= 2, 30, "two records")
    assert serve.post(f"/api/eval/run/{run_id}/stop").status == 200
    wait_branch_deleted(serve, run_id)
    assert serve.status(run_id)["status"] == "cancelled"
    assert not branches(git_daemon.bare)
    ref = result_of(git_daemon, run_id)
    assert refs(git_daemon.bare, "refs/inflight-results/") == {ref}
    assert params_at(git_daemon.bare, ref)["final_status"] == "cancelled"
    entry = index_entry(git_daemon.bare, run_id)
    assert entry["final_status"] == "cancelled" and entry["result"] == ref
    assert [a["outcome"] for a in entry["attempts"]] == ["cancelled"]
    assert 2 <= entry["records"] < 1000 and entry["total"] == 1000


def test_an_interrupted_run_finished_on_another_pod_is_published_whole(
        serve_factory, tmp_path, http_git):
    pod_a = start(serve_factory, tmp_path / "pod-a", http_git)
    run_id = pod_a.submit(tests=300, test_ms=20)
    # A file over 64 KiB, which pod-a's checkpoints chunk and pod-b restores.
    artifact = os.urandom(200 * 1024)
    (tmp_path / "artifact.bin").write_bytes(artifact)
    os.replace(tmp_path / "artifact.bin", run_dir(tmp_path / "pod-a", run_id) / "artifact.bin")
    branch = f"refs/heads/inflight/pod-a/{run_id}"
    wait_for(lambda: chunked(http_git.bare, branch, "artifact.bin"), 30, "artifact.bin chunked")
    pod_a.signal(signal.SIGTERM)
    assert pod_a.wait_exit(timeout=30) == 0, "".join(pod_a.lines)

    pod_b = start(serve_factory, tmp_path / "pod-b", http_git, pod="pod-b")
    pod_b.wait_status(run_id, "succeeded", timeout=60)
    wait_branch_deleted(pod_b, run_id)
    clone, ref = fetched_result(http_git, tmp_path, run_id)
    assert_every_record_once(git(clone, "show", f"{ref}:index.jsonl"), 300)
    assert not [name for name in tree(clone, ref) if "inflight-chunks" in name], tree(clone, ref)
    assert git(clone, "show", f"{ref}:artifact.bin", binary=True) == artifact
    entry = index_entry(http_git.bare, run_id)
    assert entry["records"] == 300 and entry["total"] == 300
    assert [a["pod"] for a in entry["attempts"]] == ["pod-a", "pod-b"]
    assert [a["outcome"] for a in entry["attempts"]] == ["interrupted", "succeeded"]
    assert entry["pod"] == "pod-b"


def test_two_pods_publishing_ten_runs_each_at_once_lose_none(serve_factory, tmp_path, git_daemon):
    pod_a = start(serve_factory, tmp_path / "pod-a", git_daemon, "--max-concurrent", "10")
    pod_b = start(serve_factory, tmp_path / "pod-b", git_daemon, "--max-concurrent", "10",
                  pod="pod-b")
    pods = [pod_a, pod_b] * 10
    ids = [pod.submit(tests=5, test_ms=1) for pod in pods]
    # Twenty publications race for the index, a push each and a retry for
    # each lost race: under the sanitizers, on 2 cores shared with another
    # test, the last took over 60 s. The test is about losing none.
    deadline = time.monotonic() + 300
    for pod, run_id in zip(pods, ids):
        wait_branch_deleted(pod, run_id, max(1, deadline - time.monotonic()))
    assert refs(git_daemon.bare, "refs/inflight-results/") == {result_of(git_daemon, i) for i in ids}
    assert sorted(index_entries(git_daemon.bare)) == sorted(ids)
    assert not has_ref(git_daemon.bare, FLAT)  # the new repo's layout, whoever came first


# A child that ends when the test lets it: a file `go` in its run dir.
GATED_CHILD = ("import os, sys, time\n"
               "out = sys.argv[1]\n"
               "while not os.path.exists(os.path.join(out, 'go')):\n"
               "    time.sleep(0.01)\n"
               "open(os.path.join(out, 'index.jsonl'), 'a').write('done' + chr(10))\n")


def test_the_same_run_id_finished_on_two_pods_keeps_the_first(serve_factory, tmp_path, git_daemon):
    """Both pods accept the id before either published it; pod-a finishes
    first. pod-b's result is refused, its index entry taken back, and its
    branch kept for an operator."""
    config = write_config(tmp_path / "config.json", {
        "argv": [PYTHON, "-c", GATED_CHILD, "{output_dir}"], "progress_file": "index.jsonl"})
    pods = {name: start(serve_factory, tmp_path / name, git_daemon, "--config", config, pod=name)
            for name in ("pod-a", "pod-b")}
    run_id = "same-run"
    for pod in pods.values():
        pod.submit(id=run_id)
        pod.wait_log(lambda e: e.get("msg") == "attempt started" and e.get("run_id") == run_id, 30)

    (run_dir(tmp_path / "pod-a", run_id) / "go").touch()
    wait_branch_deleted(pods["pod-a"], run_id)
    ref = result_of(git_daemon, run_id)
    first = git(git_daemon.bare, "rev-parse", ref)

    pod_b = pods["pod-b"]
    (run_dir(tmp_path / "pod-b", run_id) / "go").touch()
    branch = f"inflight/pod-b/{run_id}"
    pod_b.wait_log(lambda e: e.get("msg") == "the release of a finished run lost to another "
                   "instance; its branch is kept for an operator" and e.get("run_id") == run_id
                   and e.get("branch") == branch
                   and "was published by another pod first" in e.get("error", ""), 30)
    assert pod_b.status(run_id)["status"] == "succeeded"
    assert "\ninflight_results_published_total 0\n" in pod_b.get("/metrics").body
    pod_b.signal(signal.SIGTERM)
    pod_b.wait_exit(timeout=30)

    assert refs(git_daemon.bare, "refs/inflight-results/") == {ref}
    assert git(git_daemon.bare, "rev-parse", ref) == first
    published = params_at(git_daemon.bare, ref)
    assert published["origin_pod"] == "pod-a"
    assert [a["pod"] for a in published["attempts"]] == ["pod-a"]
    entry = index_entry(git_daemon.bare, run_id)
    assert entry["pod"] == "pod-a" and [a["pod"] for a in entry["attempts"]] == ["pod-a"]
    # pod-b's branch stays, with its final state, even past pod-b's shutdown.
    assert list(branches(git_daemon.bare)) == [f"refs/heads/{branch}"]
    kept = params_at(git_daemon.bare, f"refs/heads/{branch}")
    assert kept["final_status"] == "succeeded"
    assert [a["pod"] for a in kept["attempts"]] == ["pod-b"]


def test_with_publish_off_nothing_is_published(serve_factory, tmp_path, git_daemon):
    serve = start(serve_factory, tmp_path / "pod-a", git_daemon, "--publish", "off")
    run_id = serve.submit(tests=3, test_ms=1)
    wait_branch_deleted(serve, run_id)
    assert not refs(git_daemon.bare, "refs/inflight-results/")
    assert not has_index(git_daemon.bare)


def test_a_final_branch_left_unpublished_is_published_then_deleted_by_the_next_start(
        serve_factory, tmp_path, git_daemon):
    """What an earlier release left: a branch whose tip holds the final state,
    no result. Its pod's lease stayed (the hook refused that deletion too):
    the next start leaves the branch to it until it saw the lease unchanged
    for its term, then publishes it and deletes the branch; the run does not
    run again."""
    run_id = final_branch_left_unpublished(serve_factory, tmp_path / "old", git_daemon)
    assert not refs(git_daemon.bare, "refs/inflight-results/")

    new = start(serve_factory, tmp_path / "new", git_daemon, pod="pod-new")
    new.wait_log(lambda e: e.get("msg") == "checkpoint branch of a finished run deleted", 30)
    assert not branches(git_daemon.bare)
    assert index_entry(git_daemon.bare, run_id)["final_status"] == "succeeded"
    assert new.get(f"/api/eval/status/{run_id}").status == 404


def final_branch_left_unpublished(serve_factory, workdir, server):
    """The final branch an earlier release (or --publish off with a refused
    deletion) leaves: its tip holds the final state; there is no result."""
    refuse_deletions(server.bare)
    old = start(serve_factory, workdir, server, "--publish", "off", "--grace-period", "3s",
                "--flush-window", "1s")
    run_id = old.submit(tests=4, test_ms=1)
    old.wait_log(lambda e: "not deleted; will retry" in e.get("msg", ""), 60)
    old.signal(signal.SIGTERM)
    assert old.wait_exit(timeout=30) == 1
    refuse_deletions(server.bare, refuse=False)
    return run_id


def refuse_results(bare):
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nwhile read old new ref; do\n"
                    "  case $ref in refs/inflight-results/*) echo 'results refused' >&2; exit 1;;"
                    " esac\ndone\nexit 0\n")
    hook.chmod(0o755)


def test_a_result_refused_in_serve_leaves_the_final_branch_and_the_next_start_publishes_it(
        serve_factory, tmp_path, git_daemon):
    refuse_results(git_daemon.bare)
    old = start(serve_factory, tmp_path / "pod-a", git_daemon)
    run_id = old.submit(tests=3, test_ms=1)
    old.wait_log(lambda e: e.get("msg") == "a release step of a finished run did not land; "
                 "tried again next interval" and e.get("run_id") == run_id, 30)
    old.signal(signal.SIGTERM)
    assert old.wait_exit(timeout=30) == 1
    branch = f"refs/heads/inflight/pod-a/{run_id}"
    assert list(branches(git_daemon.bare)) == [branch]
    final = params_at(git_daemon.bare, branch)
    assert final["final_status"] == "succeeded"
    assert not refs(git_daemon.bare, "refs/inflight-results/")
    assert not has_index(git_daemon.bare)

    # A new pod, on an empty disk, publishes it from the branch alone.
    (git_daemon.bare / "hooks" / "pre-receive").unlink()
    new = start(serve_factory, tmp_path / "pod-b", git_daemon, pod="pod-b")
    new.wait_log(lambda e: e.get("msg") == "checkpoint branch of a finished run deleted" and
                 e.get("branch") == f"inflight/pod-a/{run_id}", 30)
    assert not branches(git_daemon.bare)
    ref = result_of(git_daemon, run_id)
    assert refs(git_daemon.bare, "refs/inflight-results/") == {ref}
    assert params_at(git_daemon.bare, ref) == final
    entry = index_entry(git_daemon.bare, run_id)
    assert entry["final_status"] == "succeeded" and entry["records"] == 3
    assert entry["pod"] == "pod-a" and entry["result"] == ref
    assert not any(e.get("msg") == "attempt started" for e in new.events())


def test_checkpoints_prune_publishes_a_finished_runs_branch_before_deleting_it(
        serve_factory, tmp_path, git_daemon):
    run_id = final_branch_left_unpublished(serve_factory, tmp_path / "old", git_daemon)
    operator = tmp_path / "operator"
    operator.mkdir()

    # A result that cannot land keeps the branch; --force deletes it anyway.
    refuse_results(git_daemon.bare)
    r = checkpoints(operator, "prune", "--run-id", run_id, repo=git_daemon.url)
    assert r.returncode != 0 and "kept, not published" in r.stderr, r.stderr
    assert branches(git_daemon.bare)
    (git_daemon.bare / "hooks" / "pre-receive").unlink()

    r = checkpoints(operator, "prune", "--run-id", run_id, repo=git_daemon.url)
    assert r.returncode == 0, r.stderr
    assert f"published inflight/pod-a/{run_id}" in r.stdout
    assert not branches(git_daemon.bare)
    assert refs(git_daemon.bare, "refs/inflight-results/") == {result_of(git_daemon, run_id)}
    assert index_entry(git_daemon.bare, run_id)["final_status"] == "succeeded"


def test_checkpoints_prune_force_deletes_what_it_cannot_publish(serve_factory, tmp_path,
                                                                git_daemon):
    run_id = final_branch_left_unpublished(serve_factory, tmp_path / "old", git_daemon)
    operator = tmp_path / "operator"
    operator.mkdir()
    refuse_results(git_daemon.bare)
    r = checkpoints(operator, "prune", "--run-id", run_id, "--force", repo=git_daemon.url)
    assert r.returncode == 0, r.stderr
    assert not branches(git_daemon.bare)
    assert not refs(git_daemon.bare, "refs/inflight-results/")


def test_a_finished_run_dir_released_without_publishing_is_published_by_the_next_start(
        serve_factory, tmp_path, git_daemon):
    """A run dir an earlier release (here --publish off) finished and whose
    branch it deleted: the next start publishes it from this disk, once; a
    result pruned on purpose later is not published again."""
    pod_a = tmp_path / "pod-a"
    old = start(serve_factory, pod_a, git_daemon, "--publish", "off")
    run_id = old.submit(tests=6, test_ms=1)
    wait_branch_deleted(old, run_id)
    old.signal(signal.SIGTERM)
    assert old.wait_exit(timeout=30) == 0
    assert not refs(git_daemon.bare, "refs/inflight-results/")

    new = start(serve_factory, pod_a, git_daemon)
    assert refs(git_daemon.bare, "refs/inflight-results/") == {result_of(git_daemon, run_id)}
    entry = index_entry(git_daemon.bare, run_id)
    assert entry["final_status"] == "succeeded" and entry["records"] == 6
    clone, ref = fetched_result(git_daemon, tmp_path, run_id)
    assert_every_record_once(git(clone, "show", f"{ref}:index.jsonl"), 6)
    new.signal(signal.SIGTERM)
    assert new.wait_exit(timeout=30) == 0

    operator = tmp_path / "operator"
    operator.mkdir()
    r = runs(operator, git_daemon, "prune", "--run-id", run_id)
    assert r.returncode == 0, r.stderr
    again = start(serve_factory, pod_a, git_daemon)
    assert again.get(f"/api/eval/status/{run_id}").json()["status"] == "succeeded"
    assert not refs(git_daemon.bare, "refs/inflight-results/")


def test_a_published_run_whose_branch_stayed_is_never_run_again(
        serve_factory, tmp_path, git_daemon):
    refuse_deletions(git_daemon.bare)
    serve = start(serve_factory, tmp_path / "pod-a", git_daemon)
    run_id = serve.submit(tests=4, test_ms=1)
    serve.wait_log(lambda e: "not deleted; will retry" in e.get("msg", ""), 60)
    assert refs(git_daemon.bare, "refs/inflight-results/") == {result_of(git_daemon, run_id)}
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=30) == 1

    # A pod on an empty disk publishes nothing new and starts nothing.
    index_before = git(git_daemon.bare, "rev-parse", LOG)
    fresh = start(serve_factory, tmp_path / "fresh", git_daemon, pod="pod-b")
    # pod-a's lease stayed (its deletion was refused too): its branch is its own.
    fresh.wait_log(lambda e: e.get("msg") == "run held by another live instance; left to it"
                   and e.get("run_id") == run_id, 30)
    assert fresh.get(f"/api/eval/status/{run_id}").status == 404
    assert git(git_daemon.bare, "rev-parse", LOG) == index_before
    assert not has_ref(git_daemon.bare, FLAT)

    # A submit of its id answers 200 with its final status, from the index.
    again = fresh.post("/api/eval/run", {"id": run_id, "tests": 4, "test_ms": 1})
    assert again.status == 200, again.body
    assert again.json()["status"] == "succeeded" and again.json()["attempt"] == 1
    assert fresh.get(f"/api/eval/status/{run_id}").json()["status"] == "succeeded"
    assert not any(e.get("msg") == "attempt started" for e in fresh.events())

    # `inflight resume` of it starts nothing either, and says why.
    ops = tmp_path / "ops"
    ops.mkdir()
    r = resume(ops, git_daemon, run_id)
    assert r.returncode == 0, r.stderr
    assert "finished and published; nothing to resume" in r.stderr + r.stdout
    assert not (ops / ".inflight" / "runs" / run_id).exists()


def test_a_restarted_pod_still_shows_its_finished_runs_and_their_logs(
        serve_factory, tmp_path, git_daemon):
    """The pod's own view survives a restart on the same runs dir: its
    finished runs are listed, their logs served, and a submit of a finished
    id answers 200 with its status and starts nothing."""
    pod_a = tmp_path / "pod-a"
    first = start(serve_factory, pod_a, git_daemon)
    run_id = first.submit(tests=5, test_ms=1)
    wait_branch_deleted(first, run_id)
    first.signal(signal.SIGTERM)
    assert first.wait_exit(timeout=30) == 0

    again = serve_factory("--pod-name", "pod-a", "--results-repo", git_daemon.url,
                          "--checkpoint-interval", "100ms", workdir=pod_a)
    again.wait_ready()
    listed = again.get("/api/eval/runs").json()["runs"]
    assert [(r["id"], r["status"]) for r in listed] == [(run_id, "succeeded")]
    resubmitted = again.post("/api/eval/run", {"id": run_id, "tests": 5, "test_ms": 1})
    assert resubmitted.status == 200 and resubmitted.json()["status"] == "succeeded"
    assert not any(e.get("msg") == "attempt started" for e in again.events())

    log = again.get(f"/api/eval/run/{run_id}/log?tail=1")
    assert log.status == 200 and log.body.strip() == \
        "inflight-demo-eval: all 5 tests done"
    whole = again.get(f"/api/eval/run/{run_id}/log").body
    assert whole.endswith(log.body) and len(whole.splitlines()) > 1
    assert again.get(f"/api/eval/run/{run_id}/log?tail=10001").status == 400
    assert again.get("/api/eval/run/no-such-run/log").status == 404


def test_a_finished_run_leaves_the_disk_after_keep_finished(serve_factory, tmp_path, git_daemon):
    serve = start(serve_factory, tmp_path / "pod-a", git_daemon, "--keep-finished", "1s")
    run_id = serve.submit(tests=2, test_ms=1)
    wait_branch_deleted(serve, run_id)
    serve.wait_log(lambda e: e.get("msg") == "finished run dir removed: --keep-finished is over"
                   and e.get("run_id") == run_id, 30)
    assert not (tmp_path / "pod-a" / ".inflight" / "runs" / run_id).exists()
    assert serve.get(f"/api/eval/status/{run_id}").status == 404
    assert refs(git_daemon.bare, "refs/inflight-results/") == {result_of(git_daemon, run_id)}


def test_progress_reads_as_records_of_the_templates_total(serve_factory, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"child": {
        "argv": [str(DEMO), "--output", "{output_dir}", "--tests", "{cases}", "--test-ms", "200"],
        "params": {"cases": {"type": "integer", "min": 1, "max": 1000, "default": 7}},
        "progress_file": "index.jsonl", "progress_total": "{cases}"}}))
    serve = serve_factory("--config", str(config))
    serve.wait_ready()
    run_id = serve.submit(cases=50)
    status = serve.wait_status(run_id, "running")
    assert status["progress"]["total"] == 50
    metrics = serve.get("/metrics").body
    assert f'inflight_run_records_expected{{run_id="{run_id}"}} 50' in metrics
    assert f'inflight_run_records{{run_id="{run_id}"}}' in metrics


def test_a_progress_total_given_as_a_number_reads_the_same(serve_factory, tmp_path):
    config = write_config(tmp_path / "config.json", {
        "argv": [str(DEMO), "--output", "{output_dir}", "--tests", "50", "--test-ms", "200"],
        "progress_file": "index.jsonl", "progress_total": 50})
    serve = serve_factory("--config", config)
    serve.wait_ready()
    run_id = serve.submit()
    status = serve.wait_status(run_id, "running")
    assert status["progress"]["total"] == 50
    listed = serve.get("/api/eval/runs").json()["runs"]
    assert [(r["id"], r["progress"]["total"]) for r in listed] == [(run_id, 50)]
    metrics = serve.get("/metrics").body
    assert f'inflight_run_records_expected{{run_id="{run_id}"}} 50' in metrics


def test_a_progress_total_that_names_no_integer_param_stops_serve(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"child": {
        "argv": [str(DEMO), "--output", "{output_dir}"], "progress_file": "index.jsonl",
        "params": {"name": {"type": "string", "default": "x"}}, "progress_total": "{name}"}}))
    result = subprocess.run([str(INFLIGHT), "serve", "--listen", "127.0.0.1:0", "--config",
                             str(config)], cwd=tmp_path, capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 2 and "child.progress_total" in result.stderr
