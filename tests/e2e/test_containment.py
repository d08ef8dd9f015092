"""Every process a child starts ends with its run (docs/security.md "Process containment"), including grandchildren that left its process group through
setsid or a double fork: at a stop, when the leader exits, at shutdown and
when serve dies by SIGKILL; with a cgroup per attempt and with the run shim
alone (--containment), serve an ordinary process or PID 1 of its namespace."""
import os
import signal
from pathlib import Path

import pytest

from inflight_testing.git_servers import git
from inflight_testing.procfs import children_of, process_exists
from inflight_testing.waiting import wait_for
from conftest import CHILDREN, INFLIGHT, PYTHON, write_config

ESCAPEES = ("setsid", "double-fork")


def cgroup_writable():
    """Whether this process could make a child cgroup of its own (as serve probes)."""
    mount = next((line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
                  if " - cgroup2 " in line), None)
    own = next((line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines()
                if line.startswith("0::/")), None)
    if mount is None or own is None:
        return False
    probe = Path(mount + own) / f"inflight-test-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    probe.rmdir()
    return True


@pytest.fixture(params=["cgroup", "shim"])
def containment(request):
    if request.param == "cgroup" and not cgroup_writable():
        pytest.skip("this process's cgroup cannot be written here")
    return request.param


def escapees_child(*extra):
    return {"argv": [PYTHON, str(CHILDREN / "escapees.py"), "--output", "{output_dir}", *extra],
            "resume_argv": ["--resume"]}


def start_serve(serve_factory, tmp_path, containment, *extra, binary=INFLIGHT, wait=True,
                child_args=()):
    config = write_config(tmp_path / "config.json",
                          escapees_child(*(["--wait"] if wait else []), *child_args))
    serve = serve_factory("--config", config, "--containment", containment,
                          "--pod-name", "pod-a", *extra, binary=binary)
    serve.wait_ready()
    chosen = ("a cgroup per attempt, under the run shim" if containment == "cgroup"
              else "run shim, without cgroups")
    assert serve.logged("containment: " + chosen), "".join(serve.lines)
    return serve


def run_dir(tmp_path, run_id):
    return tmp_path / ".inflight" / "runs" / run_id


def escapee_pids(directory):
    """The escapees' pids and the leader's, once all wrote them."""
    files = [directory / f"escapee-{how}.pid" for how in ESCAPEES] + [directory / "leader.pid"]
    wait_for(lambda: all(f.exists() for f in files), 15, "the escapees' pid files")
    return [int(f.read_text()) for f in files]


def alive(pids):
    return [pid for pid in pids if process_exists(pid)]


def test_a_stop_ends_the_escapees(serve_factory, tmp_path, containment):
    serve = start_serve(serve_factory, tmp_path, containment)
    run_id = serve.submit()
    pids = escapee_pids(run_dir(tmp_path, run_id))
    assert len(alive(pids)) == 3
    assert serve.post(f"/api/eval/run/{run_id}/stop").status == 200
    serve.wait_status(run_id, "cancelled")
    # The attempt ends only once every process of it ended.
    assert alive(pids) == []


def test_the_leaders_exit_ends_the_escapees(serve_factory, tmp_path, containment):
    serve = start_serve(serve_factory, tmp_path, containment, wait=False)
    run_id = serve.submit()
    serve.wait_status(run_id, "succeeded")
    pids = escapee_pids(run_dir(tmp_path, run_id))
    assert alive(pids) == []


def test_a_child_that_kills_its_shim_takes_its_escapees_with_it(serve_factory, tmp_path,
                                                               containment):
    # Its children run as the shim's user: one may kill it. Serve, subreaper,
    # inherits what the shim left, and ends it with the attempt.
    serve = start_serve(serve_factory, tmp_path, containment, "--max-attempts", "1",
                        wait=False, child_args=["--kill-shim"])
    run_id = serve.submit()
    serve.wait_status(run_id, "failed")
    pids = escapee_pids(run_dir(tmp_path, run_id))
    assert alive(pids) == []


def test_shutdown_ends_the_escapees_before_the_checkpoint(serve_factory, tmp_path, containment,
                                                         bare_repo):
    serve = start_serve(serve_factory, tmp_path, containment, "--results-repo", bare_repo.url)
    run_id = serve.submit()
    directory = run_dir(tmp_path, run_id)
    pids = escapee_pids(directory)
    serve.signal(signal.SIGTERM)
    assert serve.wait_exit(timeout=30) == 0, "".join(serve.lines)
    assert alive(pids) == []
    # Nothing was written after the shutdown checkpoint's commit.
    pushed = git(bare_repo.bare, "show", f"inflight/pod-a/{run_id}:escapees.log")
    assert pushed and pushed == (directory / "escapees.log").read_text()
    assert {line.split()[0] for line in pushed.splitlines()} == set(ESCAPEES)


def test_sigkill_of_serve_ends_every_child_and_grandchild(serve_factory, tmp_path, containment):
    serve = start_serve(serve_factory, tmp_path, containment)
    run_id = serve.submit()
    pids = escapee_pids(run_dir(tmp_path, run_id))
    serve.proc.kill()
    serve.wait_exit()
    wait_for(lambda: alive(pids) == [], 2, "every process of the run to end after serve's SIGKILL")


# ------------------------------------------------------------ serve as PID 1


def host_pid(member, ns_pid):
    """The host pid of the process `ns_pid` of the pid namespace `member` is in."""
    namespace = os.readlink(f"/proc/{member}/ns/pid")
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if os.readlink(entry / "ns/pid") != namespace:
                continue
            nspid = next(line for line in (entry / "status").read_text().splitlines()
                         if line.startswith("NSpid:")).split()
        except (OSError, StopIteration):
            continue
        if int(nspid[-1]) == ns_pid:
            return int(entry.name)
    return None


@pytest.fixture
def pid1_inflight(tmp_path):
    """`inflight` as PID 1 of a pid namespace of its own, with its own /proc."""
    if os.geteuid() != 0:
        pytest.skip("a pid namespace needs root")
    wrapper = tmp_path / "pid1-inflight"
    wrapper.write_text(f"#!/bin/sh\nexec unshare --pid --fork --mount-proc {INFLIGHT} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


def running_in_namespace(member, script):
    """Host pids of the processes of `member`'s pid namespace running `script`."""
    namespace = os.readlink(f"/proc/{member}/ns/pid")
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if (os.readlink(entry / "ns/pid") == namespace
                    and script in (entry / "cmdline").read_text() and process_exists(entry.name)):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def inner_serve(serve):
    """serve's host pid: the one child of `unshare`."""
    return wait_for(lambda: children_of(serve.proc.pid), 5, "serve under unshare")[0]


def escapee_host_pids(serve, tmp_path, run_id):
    inner = inner_serve(serve)
    pids = [host_pid(inner, pid) for pid in escapee_pids(run_dir(tmp_path, run_id))]
    assert None not in pids
    return inner, pids


@pytest.mark.parametrize("ending", ["stop", "leader_exit"])
def test_as_pid_1_a_stop_and_the_leaders_exit_end_the_escapees(serve_factory, tmp_path,
                                                              containment, pid1_inflight, ending):
    wait = ending == "stop"
    serve = start_serve(serve_factory, tmp_path, containment, binary=pid1_inflight, wait=wait)
    try:
        run_id = serve.submit()
        if wait:
            inner, pids = escapee_host_pids(serve, tmp_path, run_id)
            assert len(alive(pids)) == 3
            assert serve.post(f"/api/eval/run/{run_id}/stop").status == 200
            serve.wait_status(run_id, "cancelled")
            assert alive(pids) == []
        else:
            serve.wait_status(run_id, "succeeded")
            assert len(escapee_pids(run_dir(tmp_path, run_id))) == 3
            assert running_in_namespace(inner_serve(serve), "escapees.py") == []
    finally:
        # unshare passes no signal on: serve itself gets the SIGTERM.
        os.kill(inner_serve(serve), signal.SIGTERM)
        assert serve.wait_exit(timeout=30) == 0, "".join(serve.lines)
