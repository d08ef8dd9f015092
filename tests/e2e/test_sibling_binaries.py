"""Where `inflight` finds its helpers: next to it (build tree) or in
<prefix>/libexec/inflight (installed tree). A missing checkpoint agent stops
serve, resume and checkpoints at their start with exit 2, before any work; a
missing run shim stops serve and resume likewise."""
import json
import os
import shutil
import signal
import subprocess
from collections import Counter

import pytest

from inflight_testing import agent_protocol
from inflight_testing.run_dirs import index_ids
from inflight_testing.waiting import wait_for
from conftest import BIN_DIR, INFLIGHT


def clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith("INFLIGHT_")}


@pytest.mark.parametrize("args", [("serve", "--listen", "127.0.0.1:0"), ("resume", "r-1"),
                                  ("checkpoints", "list")], ids=lambda a: a[0])
def test_missing_agent_stops_the_command_at_start(tmp_path, args):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy2(INFLIGHT, bin_dir)
    work = tmp_path / "work"
    work.mkdir()
    r = subprocess.run([str(bin_dir / "inflight"), *args], cwd=work, env=clean_env(),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, r.stderr
    assert str(bin_dir / "inflight-checkpoint-agent") in r.stderr
    assert str(tmp_path / "libexec" / "inflight" / "inflight-checkpoint-agent") in r.stderr
    assert "cmake --build build" in r.stderr and "cmake --install" in r.stderr
    assert not (work / ".inflight").exists(), "nothing may start without the agent"


@pytest.mark.parametrize("args", [("serve", "--listen", "127.0.0.1:0"), ("resume", "r-1")],
                         ids=lambda a: a[0])
def test_missing_run_shim_stops_the_commands_that_run_children_at_start(tmp_path, args):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for binary in ("inflight", "inflight-checkpoint-agent", "inflight-demo-eval"):
        shutil.copy2(BIN_DIR / binary, bin_dir)
    work = tmp_path / "work"
    work.mkdir()
    r = subprocess.run([str(bin_dir / "inflight"), *args], cwd=work, env=clean_env(),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, r.stderr
    assert str(bin_dir / "inflight-run-shim") in r.stderr
    assert "cmake --install" in r.stderr


def test_installed_layout_runs_the_default_child_and_checkpoints(serve_factory, tmp_path):
    """bin/inflight with its helpers in libexec/inflight, as `cmake --install` lays them out."""
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "libexec" / "inflight").mkdir(parents=True)
    shutil.copy2(INFLIGHT, prefix / "bin")
    for helper in ("inflight-checkpoint-agent", "inflight-demo-eval", "inflight-run-shim"):
        shutil.copy2(BIN_DIR / helper, prefix / "libexec" / "inflight")
    inflight = prefix / "bin" / "inflight"
    work = tmp_path / "work"
    work.mkdir()
    runs = work / ".inflight" / "runs"

    first = serve_factory(workdir=work, binary=inflight)
    first.wait_ready()
    run_id = first.submit(tests=12, test_ms=100)
    wait_for(lambda: (runs / run_id / "index.jsonl").exists() and len(index_ids(runs / run_id)) >= 2,
             30, "two records")
    first.signal(signal.SIGTERM)
    assert first.wait_exit(timeout=60) == 0, "".join(first.lines)
    assert any(e.get("msg") == "checkpoint pushed" for e in first.events()), "".join(first.lines)

    # A new pod on an empty disk: only the checkpoint branch holds the run.
    shutil.rmtree(runs)
    second = serve_factory(workdir=work, binary=inflight)
    second.wait_ready()
    second.wait_status(run_id, "succeeded", timeout=60)
    ids = index_ids(runs / run_id)
    assert sorted(ids) == [f"t{n:03d}" for n in range(1, 13)] and max(Counter(ids).values()) == 1


@pytest.mark.parametrize("request_text, says", [
    ('{"version":99,"op":"check","store":{},"pod":"p","call":{}}', "protocol 99"),
    ('{"version":%d,"op":"reboot","store":{},"pod":"p","call":{}}' % agent_protocol.VERSION,
     "unknown checkpoint-agent op"),
    ('{"version":%d,"op":"check"}' % agent_protocol.VERSION, "store"),
    ('[' * 100 + ']' * 100, "deep"),
])
def test_the_agent_answers_a_request_it_cannot_read_with_a_failure_naming_why(request_text, says):
    agent = BIN_DIR / "inflight-checkpoint-agent"
    done = subprocess.run([str(agent)], input=request_text.encode(), capture_output=True,
                          timeout=30)
    answer = json.loads(done.stdout)
    assert done.returncode == 1
    assert answer["version"] == agent_protocol.VERSION and answer["ok"] is False
    assert answer["failure"]["kind"] == "other"
    assert says in answer["failure"]["error"], answer
