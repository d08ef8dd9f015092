"""The cache repo beside the runs dir is disposable: one left broken by a
killed agent is recreated, and a disk that cannot hold a checkpoint makes the
instance not ready until it can (SPEC §5: /readyz)."""
import signal
import subprocess

from conftest import small_tmpfs, wait_for
from git_servers import *  # noqa: F401,F403 (fixtures)


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

