"""Pytest fixtures that drive the real `inflight` binary: `serve_factory`,
one fixture per git server kind, tmpfs mounts. What they build on is the
support package (tests/support/inflight_testing, on PYTHONPATH: ctest sets
it, by hand tests/support/python does)."""

import contextlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from inflight_testing.git_servers import (start_bare_repo, start_git_daemon, start_http_git,
                                          start_https_git, start_ssh_git)
from inflight_testing.proxies import HungServer
from inflight_testing.serve import Serve

BIN_DIR = Path(os.environ.get("INFLIGHT_BIN_DIR", Path(__file__).resolve().parents[2] / "build" / "bin"))
INFLIGHT = BIN_DIR / "inflight"
DEMO = BIN_DIR / "inflight-demo-eval"
CHILDREN = Path(__file__).resolve().parent / "children"
PYTHON = "/usr/bin/python3"


@contextlib.contextmanager
def small_tmpfs(path, size="2m"):
    """A tmpfs of `size` mounted at `path` for the block; skips the test when
    it cannot be mounted (mounting needs root)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    path.mkdir(exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)])


def pytest_configure(config):
    """`runs_inflight` marks the tests of a file that otherwise checks files
    alone (test_kubernetes_manifests.py) which run the built binaries: ctest
    runs those under the sanitizers too (`-m runs_inflight`), the rest once."""
    config.addinivalue_line("markers", "runs_inflight: runs the built inflight binaries")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keeps each phase's report on the test item, for fixtures' teardown."""
    report = (yield).get_result()
    setattr(item, "report_" + report.when, report)


def print_logs(serves, tail=40):
    """What each serve said that matters, for a failed test's report (CI
    keeps nothing else)."""
    for s in serves:
        print(f"--- serve in {s.workdir} (exit {s.proc.returncode}): warnings, errors, last {tail}")
        lines = list(s.lines)
        for line in lines[:-tail]:
            if '"level":"warn"' in line or '"level":"error"' in line:
                print(line, end="")
        print("".join(lines[-tail:]), end="")


@pytest.fixture
def serve_factory(request, tmp_path):
    started = []

    def start(*args, workdir=None, env=None, binary=INFLIGHT):
        s = Serve(workdir or tmp_path, args, env, binary=binary)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()
    call = getattr(request.node, "report_call", None)
    if call is not None and call.failed:
        print_logs(started)


def write_config(path, child, **options):
    config = dict(options)
    config["child"] = child
    Path(path).write_text(json.dumps(config))
    return str(path)


def demo_child(test_ms):
    """The built-in demo template, but each test takes `test_ms` whatever the
    run asked: a pod that resumes runs with it finishes them sooner, while the
    pods they came from run at the speed the run asked for."""
    return {
        "argv": [str(DEMO), "--output", "{output_dir}", "--tests", "{tests}",
                 "--test-ms", str(test_ms)],
        "resume_argv": ["--resume"],
        "params": {"tests": {"type": "integer", "min": 0, "max": 99999, "default": 20},
                   "test_ms": {"type": "integer", "min": 0, "max": 86400000, "default": 500}},
        "progress_file": "index.jsonl",
        "progress_total": "{tests}",
    }


def script_child(script, params=None, resume_argv=("--resume",), progress_file="index.jsonl"):
    """A child template that runs one of the test children in tests/e2e/children."""
    return {
        "argv": [PYTHON, str(CHILDREN / script), "--output", "{output_dir}"],
        "resume_argv": list(resume_argv),
        "params": params or {},
        "progress_file": progress_file,
    }


# --------------------------------------------------------------------------
# git servers (function scoped: every test gets empty repos and fresh ports)


def server_fixture(start, dirname, **options):
    """A fixture that yields the GitServer of `start` in tmp_path/dirname."""
    @pytest.fixture
    def fixture(tmp_path):
        with start(tmp_path / dirname, **options) as server:
            yield server
    return fixture


bare_repo = server_fixture(start_bare_repo, "bare-repo")  # url is the path; file_url the file:// form
file_repo = server_fixture(start_bare_repo, "file-repo", file_url=True)  # url is file:///...
git_daemon = server_fixture(start_git_daemon, "git-daemon")
http_git = server_fixture(start_http_git, "http-git")
https_git = server_fixture(start_https_git, "https-git")
ssh_git = server_fixture(start_ssh_git, "ssh-git")


@pytest.fixture
def hung_server():
    with HungServer() as server:
        yield server


@pytest.fixture(params=["bare_repo", "file_repo", "git_daemon", "http_git", "https_git", "ssh_git"])
def git_server(request):
    """Each transport in turn: a test using it runs once per server kind."""
    return request.getfixturevalue(request.param)
