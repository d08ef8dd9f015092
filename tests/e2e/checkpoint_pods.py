"""The pods of the checkpoint tests (test_checkpoints*.py), which one file
held before it was split so that ctest can run its parts at once: pod A with
runs interrupted part-way, a pod's push counts, a server rule that declines
every push."""
import signal
import subprocess

from inflight_testing.run_dirs import index_ids
from inflight_testing.waiting import wait_for


def interrupted_runs(serve_factory, workdir, server, count=2, tests=12, extra=()):
    """Pod A: `count` runs interrupted part-way and checkpointed at shutdown."""
    workdir.mkdir(exist_ok=True)
    serve = serve_factory("--pod-name", "pod-a", "--results-repo", server.url, *server.flags,
                          *extra, workdir=workdir)
    serve.wait_ready()
    ids = [serve.submit(tests=tests, test_ms=100) for _ in range(count)]
    runs = workdir / ".inflight" / "runs"
    wait_for(lambda: all((runs / i / "index.jsonl").exists() and len(index_ids(runs / i)) >= 2
                         for i in ids), 30, "each run to record two tests")
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=60) == 0, "".join(serve.lines)
    return ids, runs


def show(bare, branch, path):
    return subprocess.run(["git", "-C", str(bare), "show", f"{branch}:{path}"],
                          capture_output=True, check=True).stdout

def again_pod(serve):
    return next(e["pod"] for e in serve.events() if e.get("msg") == "listening")


def pod_a(serve_factory, tmp_path, server, interval):
    """pod-a, ready, in its own work dir; its args, for a restart there."""
    workdir = tmp_path / "pod-a"
    workdir.mkdir()
    args = ("--pod-name", "pod-a", "--results-repo", server.url, "--checkpoint-interval", interval)
    serve = serve_factory(*args, workdir=workdir)
    serve.wait_ready()
    return serve, workdir, args


def decline_every_push(bare, decline=True):
    hook = bare / "hooks" / "pre-receive"
    if not decline:
        hook.unlink()
        return
    hook.write_text("#!/bin/sh\necho 'results repo is frozen' >&2\nexit 1\n")
    hook.chmod(0o755)


def pushes(serve):
    """inflight_checkpoint_pushes_total by result."""
    counts = {}
    for line in serve.get("/metrics").body.splitlines():
        if line.startswith("inflight_checkpoint_pushes_total{"):
            result = line.split('"')[1]
            counts[result] = int(float(line.split()[-1]))
    return counts
