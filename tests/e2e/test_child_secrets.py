"""Secrets out of children's reach (docs/security.md "Secrets and children"). A spy
child, run by a `serve` that holds an API token, a git token and another
template's `${NAME}` secret, reads the cmdline, environ and mem of every
process it can see while checkpoint agents come and go; none of it may hold a
secret, whether serve got its tokens as flags, as INFLIGHT_* variables or as
files. `serve` runs as a container runs it: as root here, so without
CAP_SYS_PTRACE (root with every capability reads any process)."""

import json
import os
import secrets
import shutil
import stat
import subprocess

import pytest

from conftest import CHILDREN, INFLIGHT, PYTHON, write_config
from inflight_testing.git_servers import git
from inflight_testing.waiting import wait_for

BASE = {"PATH", "HOME", "USER", "LANG", "TZ", "TMPDIR"}


def is_base(name):
    return name in BASE or name.startswith("LC_")


def sanitized():
    """Whether the binaries are an AddressSanitizer build (scripts/test runs both)."""
    ldd = subprocess.run(["ldd", str(INFLIGHT)], capture_output=True, text=True, check=True)
    return "libasan" in ldd.stdout


def is_agent(record):
    return record["cmdline"].split("\0")[0].endswith("/inflight-checkpoint-agent")


def environ_map(text):
    return dict(entry.split("=", 1) for entry in text.split("\0") if "=" in entry)


def serve_binary(tmp_path):
    """inflight, behind setpriv dropping CAP_SYS_PTRACE when the tests run as root."""
    if os.geteuid() != 0:
        return INFLIGHT
    if shutil.which("setpriv") is None:
        pytest.fail("setpriv is not installed (util-linux)")
    wrapper = tmp_path / "inflight-without-ptrace"
    wrapper.write_text("#!/bin/sh\nexec setpriv --inh-caps=-sys_ptrace --bounding-set=-sys_ptrace "
                       f"{INFLIGHT} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


def token_settings(how, tmp_path, api_token, git_token):
    """(flags, env) giving serve both tokens `how`: flags, env or files."""
    if how == "flags":
        return ["--api-token", api_token, f"--git-token={git_token}"], {}
    if how == "env":
        return [], {"INFLIGHT_API_TOKEN": api_token, "INFLIGHT_GIT_TOKEN": git_token}
    files = tmp_path / "secrets"
    files.mkdir()
    for name, value in (("api-token", api_token), ("git-token", git_token)):
        (files / name).write_text(value + "\n")  # as a Secret's volume may hold it
        (files / name).chmod(stat.S_IRUSR)
    return (["--api-token-file", str(files / "api-token")],
            {"INFLIGHT_GIT_TOKEN_FILE": str(files / "git-token")})


def templates():
    return {
        "spy": {"argv": [PYTHON, str(CHILDREN / "spy.py"), "--output", "{output_dir}"],
                "env": {"SPY_PLAIN": "plain-{run_id}"},
                "inherit_env": ["SPY_SHARED"],
                "progress_file": "seen.jsonl"},
        "other": {"argv": [PYTHON, str(CHILDREN / "argv_echo.py"), "--output", "{output_dir}"],
                  "env": {"OTHER_KEY": "${OTHER_SECRET}"}},
    }


@pytest.mark.parametrize("how", ["flags", "env", "files"])
def test_no_child_finds_a_secret(how, serve_factory, http_git, tmp_path):
    api_token, other_secret = (f"{name}-{secrets.token_hex(12)}" for name in ("api", "other"))
    git_token = http_git.token  # what the results repo accepts
    flags, env = token_settings(how, tmp_path, api_token, git_token)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"children": templates()}))
    env |= {"OTHER_SECRET": other_secret, "SPY_SHARED": "shared", "NOT_LISTED": "not-listed"}
    serve = serve_factory("--config", str(config), "--results-repo", http_git.url,
                          "--git-username", http_git.username, "--checkpoint-interval", "200ms",
                          *flags, env=env, binary=serve_binary(tmp_path))
    serve.wait_ready()
    auth = {"Authorization": f"Bearer {api_token}"}
    assert serve.get("/api/eval/runs").status == 401
    assert serve.get("/api/eval/runs", headers=auth).status == 200

    # What the kernel shows of serve to anyone (cmdline) and to its user (environ).
    pid = serve.proc.pid
    for view in ("cmdline", "environ"):
        shown = open(f"/proc/{pid}/{view}", "rb").read().decode("latin-1")
        for secret in (api_token, git_token, other_secret):
            assert secret not in shown, f"/proc/serve/{view} shows a secret"
    # What a template inherits is blanked too (the spy still gets it, below).
    shown = environ_map(open(f"/proc/{pid}/environ", "rb").read().decode("latin-1"))
    assert shown["SPY_SHARED"] == "******" and shown["NOT_LISTED"] == "not-listed"

    r = serve.post("/api/eval/run", {"child": "spy"}, headers=auth)
    assert r.status == 202, r.body
    run_id = r.json()["id"]
    wait_for(lambda: serve.get(f"/api/eval/status/{run_id}", headers=auth).json()["status"]
             in ("succeeded", "failed"), 40, "the spy to finish")
    run_dir = tmp_path / ".inflight" / "runs" / run_id
    assert serve.get(f"/api/eval/status/{run_id}", headers=auth).json()["status"] == "succeeded", \
        (run_dir / "console.log").read_text()
    found = json.loads((run_dir / "spy.json").read_text())

    assert found["agents"], "the spy never saw a checkpoint agent"
    # The spy's parent is its run's shim, whose parent is serve.
    shim, parent_of_shim = found["parents"][:2]
    assert parent_of_shim == pid
    assert any(rec["pid"] == shim and "inflight-run-shim" in (rec["cmdline"] or "")
               for rec in found["seen"])
    for record in found["seen"]:
        for secret in (api_token, git_token, other_secret):
            for view in ("cmdline", "environ"):
                assert secret not in (record[view] or ""), \
                    f"{secret[:5]}… in /proc/{record['pid']}/{view}: {record['cmdline']!r}"
    serve_records = [rec for rec in found["seen"] if rec["pid"] == pid]
    assert serve_records and all(rec["mem"] != "opened" for rec in serve_records), \
        "serve's memory was open to its child"

    # The agent works in a process forked after it turned non-dumpable: a
    # /proc/PID/mem opened while the agent was starting never sees the token.
    agent_pids = {rec["pid"] for rec in found["seen"] if is_agent(rec)}
    workers = [rec for rec in found["seen"] if is_agent(rec) and rec["ppid"] in agent_pids]
    assert workers, "the spy never saw an agent at work"
    # A sanitizer build turns dumpable again at exit, for LeakSanitizer.
    if not sanitized():
        assert all(rec["mem"] != "opened" for rec in workers), \
            "an agent's memory was open to a child"

    own = environ_map(found["own_environ"])
    serve_env = environ_map(open(f"/proc/{pid}/environ", "rb").read().decode("latin-1"))
    expected = {k: v for k, v in serve_env.items() if is_base(k)}
    expected |= {"SPY_SHARED": "shared", "SPY_PLAIN": f"plain-{run_id}"}
    assert own == expected

    # The git token (from its file in the third case) pushed the spy's run: a
    # checkpoint, or once it ended its result (a restore slowed down by a
    # sanitizer can leave the short run no periodic tick of its own).
    def pushed():
        refs = git(http_git.bare, "for-each-ref", "--format=%(refname)").split()
        return [ref for ref in refs if ref.endswith("/" + run_id)]
    wait_for(pushed, 60, "the spy's run in the results repo")
    assert not serve.logged("checkpoint not pushed")

    # The other template still gets its own secret, resolved after serve hid it.
    r = serve.post("/api/eval/run", {"child": "other"}, headers=auth)
    assert r.status == 202, r.body
    argv_file = tmp_path / ".inflight" / "runs" / r.json()["id"] / "argv.jsonl"
    lines = wait_for(lambda: argv_file.exists() and (t := argv_file.read_text()).endswith("\n")
                     and t.splitlines(), 20, "the other child to record its env")
    other_env = json.loads(lines[0])["env"]
    assert other_env["OTHER_KEY"] == other_secret
    assert "SPY_SHARED" not in other_env and "NOT_LISTED" not in other_env
