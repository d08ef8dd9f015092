"""A Kubernetes rollout with maxSurge, as issue 10 tried it: old instances run
their runs with periodic checkpoints (so their branches are in the results
repo while they live); in turn, a new instance starts on a fresh disk, then an
old one gets SIGTERM. A live pod's runs stay its own: each run is interrupted
only by its own pod's SIGTERM and resumed once, elsewhere (or, on a loaded
machine, finished at home before that SIGTERM)."""

import signal
from collections import Counter

from inflight_testing.git_servers import branches, git
from inflight_testing.results_index import FLAT, has_ref, index_entries
from inflight_testing.run_dirs import index_ids, run_params
from inflight_testing.waiting import wait_for

from conftest import demo_child, write_config

OLD_PODS = 4
RUNS_PER_POD = 8
TESTS = 300
# 90 s a run: the old pods stay busy through the rollout. At 45 s, a
# sanitized run on a loaded machine ended an old pod's own runs before its
# SIGTERM: idle, it took a handed-over run (as an idle pod should), and its
# SIGTERM moved that run a second time.
TEST_MS = 300
# The new pods run what they resume at 20 ms a test: once the rollout is over,
# the runs end in seconds instead of sleeping out their 90 s.
NEW_POD_TEST_MS = 20
INTERVAL = "2s"
# A pod's shutdown pushes its 8 runs and gives its lease up in one push: under
# the sanitizers that took 8.5-9.1 s, and a grace period of 10 s (a push
# deadline of 9.5 s) was missed. What is tested is the rollout, not the speed.
GRACE = "20s"


def start_pod(serve_factory, tmp_path, server, name, *config):
    workdir = tmp_path / name
    workdir.mkdir()
    pod = serve_factory("--pod-name", name, "--results-repo", server.url,
                        "--checkpoint-interval", INTERVAL, "--grace-period", GRACE,
                        "--max-concurrent", str(RUNS_PER_POD * OLD_PODS), *config,
                        workdir=workdir)
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
    fast = write_config(tmp_path / "new-pods.json", demo_child(NEW_POD_TEST_MS))
    for n, pod in enumerate(old):
        new.append(start_pod(serve_factory, tmp_path, git_daemon, f"new-{n}", "--config", fast))
        pod.signal(signal.SIGTERM)
        assert pod.wait_exit(timeout=30) == 0, f"{pod.name}'s rollout SIGTERM did not exit 0"

    def finished():
        """Each run's dir that holds its succeeded attempt, on any pod's disk."""
        done = {}
        for pod in old + new:
            for run_id in origin:
                run_dir = pod.workdir / ".inflight" / "runs" / run_id
                if (run_dir / "run-params.json").exists() and any(
                        a["outcome"] == "succeeded" for a in run_params(run_dir)["attempts"]):
                    done.setdefault(run_id, []).append(run_dir)
        return done if len(done) == len(origin) else None

    done = wait_for(finished, 300, "every run to finish", interval=0.5)
    for pod in new:
        pod.signal(signal.SIGTERM)
        assert pod.wait_exit(timeout=30) == 0
    moved = set()
    for run_id, run_dirs in done.items():
        assert len(run_dirs) == 1, f"run {run_id} finished in {run_dirs}"
        attempts = [(a["pod"], a["outcome"]) for a in run_params(run_dirs[0])["attempts"]]
        # A loaded machine may finish a run before its own pod's SIGTERM.
        if len(attempts) == 2:
            moved.add(run_id)
        assert attempts in ([(origin[run_id], "succeeded")],
                            [(origin[run_id], "interrupted"), (attempts[-1][0], "succeeded")]), \
            f"run {run_id} was stopped by another pod than its own: {attempts}"
        ids = index_ids(run_dirs[0])
        repeated = [t for t, n in Counter(ids).items() if n > 1]
        assert sorted(set(ids)) == [f"t{n:03d}" for n in range(1, TESTS + 1)] and not repeated, \
            f"run {run_id}: tests run twice {repeated}"
    first_pod = {run_id for run_id, pod in origin.items() if pod == old[0].name}
    assert first_pod <= moved, "the first pod's runs, stopped right after their checkpoints, moved"
    assert not branches(git_daemon.bare), "branches left"
    assert git(git_daemon.bare, "for-each-ref", "refs/heads/inflight-lease/") == "", "leases left"
    # Every run is published once, with its index entry.
    results = git(git_daemon.bare, "for-each-ref", "--format=%(refname:lstrip=2)",
                  "refs/inflight-results/").split()
    assert sorted(results) == sorted(origin)
    assert sorted(index_entries(git_daemon.bare)) == sorted(origin)
    assert not has_ref(git_daemon.bare, FLAT)  # the new repo's layout, whoever came first
