"""Serve's secret files hidden from children (docs/security.md "Process containment"):
the token files and the config file, given to serve, read as empty from its
run's child, while serve itself goes on using the token. The run shim does
the hiding, in a private mount namespace; as an unprivileged user through a
user namespace of the child's own; and when it cannot, the child still runs
and console.log says why."""

import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import BIN_DIR, CHILDREN, PYTHON, write_config
from inflight_testing.waiting import wait_for

SHIM = BIN_DIR / "inflight-run-shim"
NOT_HIDDEN = "inflight-run-shim: secret files not hidden from the child"


def secret_volume(directory, files):
    """Files laid out as a Kubernetes Secret volume: each name a symlink into ..data/."""
    data = directory / "..2026_11_25"
    data.mkdir(parents=True)
    (directory / "..data").symlink_to(data.name)
    for name, value in files.items():
        (data / name).write_text(value + "\n")
        (directory / name).symlink_to(Path("..data") / name)
    return [directory / name for name in files]


def test_a_child_reads_nothing_of_serves_secret_files(serve_factory, http_git, tmp_path):
    api_token = f"api-{secrets.token_hex(12)}"
    api_file, git_file = secret_volume(tmp_path / "secrets",
                                       {"api-token": api_token, "git-token": http_git.token})
    config = tmp_path / "config.json"
    write_config(config, {"argv": [PYTHON, str(CHILDREN / "read_files.py"), "--output",
                                   "{output_dir}", str(api_file), str(git_file), str(config)]})
    assert api_token in api_file.read_text()  # what the child would read, unhidden
    serve = serve_factory("--config", str(config), "--results-repo", http_git.url,
                          "--git-username", http_git.username, "--git-token-file", str(git_file),
                          "--api-token-file", str(api_file))
    serve.wait_ready()
    auth = {"Authorization": f"Bearer {api_token}"}
    r = serve.post("/api/eval/run", {}, headers=auth)
    assert r.status == 202, r.body
    run_id = r.json()["id"]
    status = lambda: serve.get(f"/api/eval/status/{run_id}", headers=auth).json()["status"]
    wait_for(lambda: status() in ("succeeded", "failed"), 30, "the reader to finish")
    run_dir = tmp_path / ".inflight" / "runs" / run_id
    console = (run_dir / "console.log").read_text()
    assert status() == "succeeded", console
    assert NOT_HIDDEN not in console
    found = json.loads((run_dir / "read.json").read_text())
    assert found == {str(api_file): "", str(git_file): "", str(config): ""}
    # Hidden from the child alone: serve's API still takes the token.
    assert serve.get("/api/eval/runs").status == 401
    assert serve.get("/api/eval/runs", headers=auth).status == 200


def rotate(directory, files):
    """What the kubelet does when the Secret changes: a new folder, ..data relinked."""
    data = directory / "..2026_11_26"
    data.mkdir()
    for name, value in files.items():
        (data / name).write_text(value + "\n")
    (directory / "..data.tmp").symlink_to(data.name)
    os.rename(directory / "..data.tmp", directory / "..data")


def test_a_secret_updated_while_serve_runs_stays_hidden(serve_factory, tmp_path):
    secret_dir = tmp_path / "secrets"
    (git_file,) = secret_volume(secret_dir, {"git-token": "first-token"})
    config = tmp_path / "config.json"
    write_config(config, {"argv": [PYTHON, str(CHILDREN / "read_files.py"), "--output",
                                   "{output_dir}", str(git_file)]})
    serve = serve_factory("--config", str(config), "--git-token-file", str(git_file))
    serve.wait_ready()
    rotate(secret_dir, {"git-token": "second-token"})
    assert "second-token" in git_file.read_text()  # what the child would read, unhidden
    run_id = serve.submit()
    serve.wait_status(run_id, "succeeded")
    run_dir = tmp_path / ".inflight" / "runs" / run_id
    assert NOT_HIDDEN not in (run_dir / "console.log").read_text()
    assert json.loads((run_dir / "read.json").read_text()) == {str(git_file): ""}


def run_shim(*args, user=()):
    """The shim alone, as serve starts it: fd 0 a socket to its parent. (exit code, stdout, stderr)."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        proc = subprocess.run([*user, str(SHIM), "--parent", str(os.getpid()), *args],
                              stdin=theirs, capture_output=True, text=True, timeout=30)
    return proc.returncode, proc.stdout, proc.stderr


UNPRIVILEGED = {
    "nobody": ["--reuid=65534", "--regid=65534", "--clear-groups"],
    "root without CAP_SYS_ADMIN": ["--inh-caps=-sys_admin", "--bounding-set=-sys_admin"],
}


@pytest.fixture(params=UNPRIVILEGED)
def unprivileged(request):
    """setpriv running a user that cannot make a mount namespace by itself."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the shim unprivileged")
    return ["setpriv", *UNPRIVILEGED[request.param]]


@pytest.fixture
def a_secret():
    """A file any user may read, in a directory any user may enter."""
    directory = Path(tempfile.mkdtemp(prefix="inflight-hidden-"))
    directory.chmod(0o755)
    secret = directory / "token"
    secret.write_text("the-secret\n")
    os.chown(secret, 65534, 65534)
    secret.chmod(0o444)
    yield secret
    shutil.rmtree(directory)


def test_unprivileged_the_shim_hides_through_a_user_namespace(unprivileged, a_secret):
    # The child tries to unmount what hides the file: the mount is locked.
    reader = ["/bin/sh", "-c", f"umount {a_secret} 2>/dev/null; cat {a_secret}"]
    assert run_shim("--", *reader, user=unprivileged) == (0, "the-secret\n", "")
    code, out, err = run_shim("--hide", str(a_secret), "--", *reader, user=unprivileged)
    assert (code, out) == (0, ""), err
    assert NOT_HIDDEN not in err


def test_a_file_that_cannot_be_hidden_leaves_the_child_running_and_says_why(tmp_path):
    missing = tmp_path / "gone"
    code, out, err = run_shim("--hide", str(missing), "--", "/bin/echo", "ran")
    assert (code, out) == (0, "ran\n")
    assert err == f"{NOT_HIDDEN}: {missing}: No such file or directory\n"
