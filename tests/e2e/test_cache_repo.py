"""The cache repo beside the runs dir is disposable: one left broken by a
killed agent is recreated, and a disk that cannot hold a checkpoint makes the
instance not ready until it can (docs/checkpoints.md "How checkpoints are stored")."""
import fcntl
import os
import signal
import subprocess

from inflight_testing.git_servers import branches
from inflight_testing.waiting import wait_for
from conftest import small_tmpfs


def test_a_cache_left_half_created_is_recreated(serve_factory, tmp_path, bare_repo):
    cache = tmp_path / ".inflight" / "cache.git"
    (cache / "objects").mkdir(parents=True)
    (cache / "HEAD.lock").write_text("ref: refs/heads/master\n")  # an agent killed in init
    serve = serve_factory("--pod-name", "pod-a", "--results-repo", bare_repo.url)
    serve.wait_ready()
    run_id = serve.submit(tests=40, test_ms=100)
    serve.wait_status(run_id, "running")
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=30) == 0, "".join(serve.lines)
    assert f"refs/heads/inflight/pod-a/{run_id}" in branches(bare_repo.bare)
    assert (cache / "HEAD").exists() and not (cache / "HEAD.lock").exists()


def test_temp_files_of_killed_agents_go_and_a_live_ones_stay(serve_factory, tmp_path,
                                                               bare_repo):
    cache = tmp_path / ".inflight" / "cache.git"
    serve = serve_factory("--pod-name", "pod-a", "--results-repo", bare_repo.url)
    serve.wait_ready()
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=30) == 0
    pack = cache / "objects" / "pack"
    dead, live = pack / "tmp_pack_inflight_dead01", pack / "tmp_pack_inflight_live01"
    for path in (dead, live):
        path.write_bytes(b"\0" * 4096)
    # Older than an hour, the least age swept (the deadlines are 60 s and 30 s).
    os.utime(dead, (os.path.getmtime(dead) - 2 * 3600,) * 2)
    serve = serve_factory("--pod-name", "pod-a", "--results-repo", bare_repo.url)
    swept = serve.wait_log(lambda e: e.get("msg") ==
                           "temp files of killed agents removed from the cache", 30)
    assert swept["files"] == 1
    assert not dead.exists() and live.exists()


def fill(directory):
    """Writes until the volume is full; returns the filler file."""
    filler = directory / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
    return filler


def test_a_disk_that_cannot_checkpoint_is_not_ready_until_it_can(serve_factory, tmp_path,
                                                                 bare_repo):
    with small_tmpfs(tmp_path / ".inflight") as volume:
        (volume / "runs").mkdir()
        filler = fill(volume)
        serve = serve_factory("--pod-name", "pod-a", "--results-repo", bare_repo.url)
        ready = wait_for(lambda: (r := serve.get("/readyz")).status == 503 and
                         r.json().get("error") == "cannot_checkpoint" and r, 30,
                         "readyz to say the disk cannot checkpoint")
        assert "No space left" in ready.json()["message"], ready.body
        assert serve.get("/healthz").status == 200
        refused = serve.post("/api/eval/run", {"tests": 1})
        assert refused.status == 503 and refused.json()["error"] == "cannot_checkpoint"
        filler.unlink()
        serve.wait_ready(timeout=30)
        run_id = serve.submit(tests=40, test_ms=100)
        serve.wait_status(run_id, "running")
        serve.signal(signal.SIGTERM)
        assert serve.wait_exit(timeout=30) == 0, "".join(serve.lines)
        assert f"refs/heads/inflight/pod-a/{run_id}" in branches(bare_repo.bare)



def test_a_restore_this_disk_cannot_write_makes_the_pod_not_ready(serve_factory, tmp_path,
                                                                   bare_repo):
    # pod-a leaves a run of 2,000 to 4,000 records (150 to 300 kB) on its branch: its copy never
    # fits in pod-b's 96 kB, its pack always does.
    (tmp_path / "a").mkdir()
    pod_a = serve_factory("--pod-name", "pod-a", "--results-repo", bare_repo.url,
                          workdir=tmp_path / "a")
    pod_a.wait_ready()
    run_id = pod_a.submit(tests=4000, test_ms=5)
    wait_for(lambda: (tmp_path / "a" / ".inflight" / "runs" / run_id / "index.jsonl").exists() and
             (tmp_path / "a" / ".inflight" / "runs" / run_id / "index.jsonl").stat().st_size >
             150_000, 60, "150 kB of records")
    pod_a.signal(signal.SIGTERM)
    assert pod_a.wait_exit(timeout=30) == 0
    # pod-b's volume holds its cache and a small write, not the run's copy.
    (tmp_path / "b").mkdir()
    with small_tmpfs(tmp_path / "b" / ".inflight", size="4m") as volume:
        (volume / "runs").mkdir()
        filler = fill(volume)
        os.truncate(filler, filler.stat().st_size - 96 * 1024)
        pod_b = serve_factory("--pod-name", "pod-b", "--results-repo", bare_repo.url,
                              "--checkpoint-interval", "500ms", workdir=tmp_path / "b")
        failed = pod_b.wait_log(lambda e: e.get("msg") ==
                                "this disk cannot hold a checkpoint; not ready until it can", 30)
        assert "restore a run" in failed["error"] and "No space left" in failed["error"], failed
        filler.unlink()
        pod_b.wait_log(lambda e: e.get("msg") == "run restored" and e.get("run_id") == run_id, 60)
        pod_b.wait_ready(timeout=30)
        assert pod_b.status(run_id)["status"] == "running"


def blocked_on(lock_file):
    """Whether some process waits for a flock on `lock_file` (/proc/locks
    lists waiters with '->')."""
    inode = os.stat(lock_file).st_ino
    return any(line.split()[1] == "->" and line.split()[6].endswith(f":{inode}")
               for line in open("/proc/locks") if len(line.split()) > 6)


def test_a_fetch_waits_for_another_agents_push_to_end(serve_factory, tmp_path, git_daemon):
    """A ref naming an object that only another agent's memory holds makes
    libgit2's fetch fail ("object not found"): the rollout test saw looks fail
    so while a periodic push was under way (pushes then sent from loose tags;
    their sources are in memory now). The push holds the cache lock, and a
    fetch of another agent waits for it."""
    pod_a, pod_b = tmp_path / "pod-a", tmp_path / "pod-b"
    pod_a.mkdir(), pod_b.mkdir()
    first = serve_factory("--pod-name", "pod-a", "--results-repo", git_daemon.url, workdir=pod_a)
    first.wait_ready()
    run_id = first.submit(tests=200, test_ms=100)
    first.wait_status(run_id, "running")
    first.signal()
    assert first.wait_exit() == 0
    # pod-b moves the branch: pod-a's next look must fetch commits it lacks.
    taker = serve_factory("--pod-name", "pod-b", "--results-repo", git_daemon.url, workdir=pod_b)
    taker.wait_ready()
    taker.wait_status(run_id, "running")
    taker.signal()
    assert taker.wait_exit() == 0
    # pod-a's cache as another agent's push leaves it while under way.
    cache = pod_a / ".inflight" / "cache.git"
    tag = cache / "refs" / "tags" / "inflight-push" / "99999" / "inflight" / "x"
    tag.parent.mkdir(parents=True)
    tag.write_text("0123456789abcdef0123456789abcdef01234567\n")
    lock_file = cache / "inflight-refs.lock"
    with open(lock_file, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        second = serve_factory("--pod-name", "pod-a", "--results-repo", git_daemon.url,
                               workdir=pod_a)
        wait_for(lambda: blocked_on(lock_file), 30, "the restore's fetch to wait for the lock")
        assert second.get("/readyz").status == 503
        tag.unlink()  # the push is over
    second.wait_ready()
    assert second.status(run_id)["attempt"] >= 3, "pod-a takes the run back"
    assert not [line for line in second.lines if "object not found" in line]
