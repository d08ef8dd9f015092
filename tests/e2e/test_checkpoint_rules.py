"""What a checkpoint saves, a restore takes (docs/checkpoints.md "What a checkpoint saves, a restore takes"): a
child that makes what a restore refuses beside its records (a name that is
not UTF-8, a directory 200 levels deep, a sparse file over --restore-max-bytes,
a FIFO, a socket, a symlink) gets those left out of its checkpoints, each
named once in the log, and its run moves to a fresh pod and finishes there;
a run dir still over a limit fails its own checkpoints, in its status and in
/metrics, while the other runs' land."""
import json
import re
import signal
from collections import Counter

from inflight_testing.git_servers import branches
from inflight_testing.run_dirs import index_ids
from inflight_testing.waiting import wait_for
from conftest import CHILDREN, DEMO, PYTHON

MAX_BYTES = 4 << 20
DEEP = "deep/" + "/".join(f"d{n}" for n in range(1, 65))  # the first directory past 64 levels
LEFT_OUT = {"bad\\xff.txt": "name is not UTF-8",
            DEEP: "nested deeper than 64 directories",
            "sparse.bin": f"file of {2 * MAX_BYTES} bytes is over the byte limit of {MAX_BYTES}",
            "pipe": "FIFO", "sock": "socket", "link": "symbolic link"}


def config(workdir):
    """The demo child as `default`, and `refusing`, which makes what a restore refuses."""
    integer = {"type": "integer", "min": 0, "max": 100000, "default": 0}
    demo = {"argv": [str(DEMO), "--output", "{output_dir}", "--tests", "{tests}", "--test-ms", "{test_ms}"],
            "resume_argv": ["--resume"], "progress_file": "index.jsonl",
            "params": {"tests": integer, "test_ms": integer}}
    refusing = {"argv": [PYTHON, str(CHILDREN / "leaves_refused_entries.py"), "--output", "{output_dir}",
                         "--tests", "{tests}", "--test-ms", "{test_ms}", "--refused", "{refused}",
                         "--sparse-bytes", "{sparse_bytes}", "--files", "{files}"],
                "resume_argv": ["--resume"], "progress_file": "index.jsonl",
                "params": {"tests": integer, "test_ms": integer,
                           "refused": integer, "sparse_bytes": dict(integer, max=1 << 30),
                           "files": integer}}
    path = workdir / "config.json"
    path.write_text(json.dumps({"children": {"default": demo, "refusing": refusing}}))
    return str(path)


def start_pod(serve_factory, tmp_path, repo, name, *args):
    workdir = tmp_path / name
    workdir.mkdir()
    serve = serve_factory("--pod-name", name, "--results-repo", repo.url, "--config", config(workdir),
                          *args, workdir=workdir)
    serve.wait_ready(timeout=60)
    return serve, workdir / ".inflight" / "runs"


def all_records_once(run_dir, count):
    ids = index_ids(run_dir)
    return sorted(ids) == [f"t{n:03d}" for n in range(1, count + 1)] and max(Counter(ids).values()) == 1


def left_out_logged(serve):
    return Counter((e["run_id"], e["path"], e["rule"]) for e in serve.events()
                   if e.get("msg") == "checkpoint entry left out")


def test_entries_a_restore_refuses_are_left_out_once_named_and_the_run_finishes_elsewhere(
        serve_factory, tmp_path, bare_repo):
    limits = ("--restore-max-bytes", str(MAX_BYTES), "--checkpoint-interval", "300ms")
    pod_a, runs_a = start_pod(serve_factory, tmp_path, bare_repo, "pod-a", *limits)
    refusing = pod_a.submit(child="refusing", tests=40, test_ms=50, refused=1, sparse_bytes=2 * MAX_BYTES)
    normal = pod_a.submit(tests=40, test_ms=50)
    wait_for(lambda: all((runs_a / r / "index.jsonl").exists() and len(index_ids(runs_a / r)) >= 3
                         for r in (refusing, normal)), 30, "both runs to record three tests")
    # Periodic checkpoints of the dir with every refused entry in it, then the shutdown's.
    wait_for(lambda: len(left_out_logged(pod_a)) == len(LEFT_OUT), 30, "every entry to be left out")
    pod_a.signal(signal.SIGTERM)
    assert pod_a.wait_exit(timeout=60) == 0

    assert left_out_logged(pod_a) == Counter({(refusing, path, rule): 1 for path, rule in LEFT_OUT.items()})
    assert len(branches(bare_repo.bare)) == 2

    pod_b, runs_b = start_pod(serve_factory, tmp_path, bare_repo, "pod-b", *limits)
    for run_id in (refusing, normal):
        status = pod_b.wait_status(run_id, "succeeded", timeout=60)
        assert status["attempt"] == 2 and status["checkpoint"]["error"] is None, status
        assert all_records_once(runs_b / run_id, 40)
    assert (runs_b / refusing / "entries-made").exists()
    for refused in ("sparse.bin", "pipe", "sock", "link", "deep"):
        assert not (runs_b / refusing / refused).exists(), refused
    assert not any(e.get("msg") == "checkpoint not restored" for e in pod_b.events())
    wait_for(lambda: not branches(bare_repo.bare), 30, "the finished runs' branches to be deleted")


def metric(serve, name, labels):
    found = re.search("^" + re.escape(f"{name}{{{labels}}}") + r" (\d+)$", serve.get("/metrics").body, re.M)
    return int(found.group(1)) if found else None


def test_a_run_dir_still_over_a_limit_fails_its_own_checkpoint_while_the_others_land(
        serve_factory, tmp_path, bare_repo):
    serve, runs = start_pod(serve_factory, tmp_path, bare_repo, "pod-a", "--restore-max-files", "40",
                            "--checkpoint-interval", "300ms")
    many = serve.submit(child="refusing", tests=1000, test_ms=50, files=100)
    normal = serve.submit(tests=1000, test_ms=50)
    wait_for(lambda: (runs / many / "entries-made").exists(), 30, "the hundred files")

    failing = wait_for(lambda: (s := serve.status(many))["checkpoint"]["error"] and s, 30,
                       "the over-limit run's checkpoint to fail")
    assert "more than 40 files" in failing["checkpoint"]["error"], failing
    assert failing["checkpoint"]["failing_since"] and failing["status"] == "running", failing
    assert metric(serve, "inflight_checkpoint_failures_total", 'reason="over_limit"') >= 1
    assert metric(serve, "inflight_checkpoint_failures_total", 'reason="rejected"') == 0
    assert any(e.get("msg") == "checkpoint refused: the run dir is over the restore limits"
               and e.get("run_id") == many for e in serve.events())

    landed = wait_for(lambda: (s := serve.status(normal))["checkpoint"]["last_commit"] and s, 30,
                      "the other run's checkpoint to land")
    assert landed["checkpoint"]["error"] is None
    tip = f"refs/heads/inflight/pod-a/{normal}"
    wait_for(lambda: branches(bare_repo.bare).get(tip) == serve.status(normal)["checkpoint"]["last_commit"],
             30, "the other run's branch to hold its last checkpoint")
    # The over-limit run's shutdown checkpoint fails too: its dir stays on this disk.
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=60) == 1
