"""A Kubernetes rollout with maxSurge, as issue 10 tried it: old instances run
their runs with periodic checkpoints (so their branches are in the results
repo while they live); in turn, a new instance starts on a fresh disk, then an
old one gets SIGTERM. A live pod's runs stay its own: each run is interrupted
only by its own pod's SIGTERM and resumed once, elsewhere."""

import signal
from collections import Counter

from conftest import index_ids, run_params, wait_for
from git_servers import *  # noqa: F401,F403 (fixtures)
from git_servers import branches, git

OLD_PODS = 4
RUNS_PER_POD = 8
TESTS = 200
TEST_MS = 150
INTERVAL = "2s"


def start_pod(serve_factory, tmp_path, server, name):
    workdir = tmp_path / name
    workdir.mkdir()
    pod = serve_factory("--pod-name", name, "--results-repo", server.url,
                        "--checkpoint-interval", INTERVAL, "--grace-period", "10s",
                        "--max-concurrent", str(RUNS_PER_POD * OLD_PODS), workdir=workdir)
    pod.wait_ready()
    pod.name = name
    return pod


def test_a_rollout_moves_each_run_once(serve_factory, tmp_path, git_daemon):
    old = [start_pod(serve_factory, tmp_path, git_daemon, f"old-{n}") for n in range(OLD_PODS)]
    origin = {}
    for pod in old:
        for _ in range(RUNS_PER_POD):
            origin[pod.submit(tests=TESTS, test_ms=TEST_MS)] = pod.name
    wait_for(lambda: len(branches(git_daemon.bare)) == len(origin), 30,
             "a periodic checkpoint of every run")

    new = []
    for n, pod in enumerate(old):
        new.append(start_pod(serve_factory, tmp_path, git_daemon, f"new-{n}"))
        pod.signal(signal.SIGTERM)
        assert pod.wait_exit(timeout=20) == 0, f"{pod.name}'s rollout SIGTERM did not exit 0"

    def finished_where():
        done = {}
        for pod in new:
            for run_id in origin:
                r = pod.get(f"/api/eval/status/{run_id}")
                if r.status == 200 and r.json()["status"] == "succeeded":
                    done.setdefault(run_id, []).append(pod)
        return done if len(done) == len(origin) else None

    done = wait_for(finished_where, 120, "every run to finish on a new pod")
    for pod in new:
        pod.signal(signal.SIGTERM)
        assert pod.wait_exit(timeout=20) == 0
    for run_id, pods in done.items():
        assert len(pods) == 1, f"run {run_id} finished on {[p.name for p in pods]}"
        run_dir = pods[0].workdir / ".inflight" / "runs" / run_id
        attempts = run_params(run_dir)["attempts"]
        assert len(attempts) == 2, f"run {run_id}: {attempts}"
        assert attempts[0]["pod"] == origin[run_id] and attempts[0]["outcome"] == "interrupted", \
            f"run {run_id} was stopped by another pod than its own: {attempts}"
        ids = index_ids(run_dir)
        repeated = [t for t, n in Counter(ids).items() if n > 1]
        assert sorted(set(ids)) == [f"t{n:03d}" for n in range(1, TESTS + 1)] and not repeated, \
            f"run {run_id}: tests run twice {repeated}"
    assert not branches(git_daemon.bare), "branches left"
    assert git(git_daemon.bare, "for-each-ref", "refs/heads/") == "", "leases left"
