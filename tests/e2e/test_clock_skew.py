"""Pods whose wall clocks disagree by ten minutes share a results repo
(docs/checkpoints.md "Leases and clocks"): no pod takes a live pod's run,
whatever the leases' timestamps say, and a killed pod's runs are taken once
its lease was seen unchanged for its whole term. libfaketime moves serve's
wall clock (and its agent's), never the monotonic one."""
import os
import signal
import time

from inflight_testing.run_dirs import index_ids, run_params
from inflight_testing.waiting import wait_for

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
# --checkpoint-interval 1s and --grace-period 3s: a lease of 3 x 1 s + 3 s.
TERM_S = 6


def skewed(offset):
    asan = os.environ.get("ASAN_OPTIONS", "")
    return {"LD_PRELOAD": LIBFAKETIME, "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            # ASan insists on being first in the link order unless told not to.
            "ASAN_OPTIONS": (asan + ":" if asan else "") + "verify_asan_link_order=0"}


def start(serve_factory, tmp_path, server, pod, offset):
    workdir = tmp_path / pod
    workdir.mkdir()
    serve = serve_factory("--pod-name", pod, "--results-repo", server.url,
                          "--checkpoint-interval", "1s", "--grace-period", "3s",
                          "--flush-window", "1s", "--max-concurrent", "3",
                          workdir=workdir, env=skewed(offset))
    serve.wait_ready()
    return serve, workdir / ".inflight" / "runs"


def test_pods_ten_minutes_apart_never_take_each_others_live_runs(
        serve_factory, tmp_path, git_daemon):
    ahead, ahead_runs = start(serve_factory, tmp_path, git_daemon, "pod-ahead", "+10m")
    behind, behind_runs = start(serve_factory, tmp_path, git_daemon, "pod-behind", "-10m")
    runs = {ahead: [ahead.submit(tests=60, test_ms=150) for _ in range(3)],
            behind: [behind.submit(tests=60, test_ms=150) for _ in range(3)]}
    for serve, ids in runs.items():
        for run_id in ids:
            serve.wait_status(run_id, "succeeded", timeout=90)
    for serve, runs_dir in ((ahead, ahead_runs), (behind, behind_runs)):
        for run_id in runs[serve]:
            recorded = index_ids(runs_dir / run_id)
            assert sorted(recorded) == [f"t{n:03d}" for n in range(1, 61)], "a case ran twice"
            assert len(run_params(runs_dir / run_id)["attempts"]) == 1
    for serve in runs:
        assert not serve.logged("runs taken over from other instances")
    assert any(e.get("msg", "").startswith("another pod's clock looks skewed")
               for e in ahead.events() + behind.events())


def test_a_killed_pods_runs_are_taken_after_one_term_of_watching_its_lease(
        serve_factory, tmp_path, git_daemon):
    ahead, _ = start(serve_factory, tmp_path, git_daemon, "pod-ahead", "+10m")
    behind, _ = start(serve_factory, tmp_path, git_daemon, "pod-behind", "-10m")
    run_id = behind.submit(tests=200, test_ms=100)
    behind.wait_log(lambda e: e.get("msg") == "checkpoint pushed" and e.get("run_id") == run_id,
                    30)
    killed = time.monotonic()
    behind.proc.send_signal(signal.SIGKILL)
    behind.proc.wait(timeout=10)
    wait_for(lambda: ahead.get(f"/api/eval/status/{run_id}").status == 200, 60,
             "the killed pod's run to be taken")
    taken_after = time.monotonic() - killed
    # Its last renewal came at most a period before the kill.
    assert taken_after >= TERM_S - 1.5, f"taken {taken_after:.1f} s after the kill"
    ahead.wait_status(run_id, "succeeded", timeout=90)
