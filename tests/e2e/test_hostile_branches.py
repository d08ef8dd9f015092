"""A checkpoint branch is data, never code (docs/security.md "A branch is data", "Checkpoints in git").

Branches are crafted with git plumbing, as an attacker with push access to the
results repo would write them, each beside a legitimate branch that must still
restore and finish. Every test asserts the effect: a marker file absent, a file
unchanged, the legitimate run's records complete, a branch kept as it was.
"""
import json
import subprocess
from collections import Counter

from inflight_testing.git_servers import git_env
from inflight_testing.run_dirs import index_ids, run_params
from inflight_testing.waiting import wait_for
from conftest import DEMO, INFLIGHT, PYTHON, CHILDREN

SECRET = "s3cret-git-token"


def refs(bare):
    """{ref: sha} of every inflight branch, names as raw bytes (they may not be UTF-8)."""
    out = subprocess.run(["git", "-C", str(bare), "for-each-ref", "--format=%(refname) %(objectname)",
                          "refs/heads/inflight/"], capture_output=True, check=True).stdout
    return dict(line.rsplit(b" ", 1) for line in out.splitlines())


def blob(bare, content):
    data = content if isinstance(content, bytes) else content.encode()
    return subprocess.run(["git", "-C", str(bare), "hash-object", "-w", "--stdin"], input=data,
                          capture_output=True, check=True).stdout.strip()


def commit_tree(bare, ref, entries):
    """Points `ref` (bytes or str) at a commit of a root tree of `entries`: (name, blob sha)."""
    lines = b"".join(b"100644 blob " + sha + b"\t" + (name if isinstance(name, bytes) else name.encode())
                     + b"\n" for name, sha in entries)
    tree = subprocess.run(["git", "-C", str(bare), "mktree", "--missing"], input=lines,
                          capture_output=True, check=True).stdout.strip()
    commit = subprocess.run(["git", "-C", str(bare), "commit-tree", tree, "-m", "crafted"],
                            capture_output=True, check=True, env=git_env()).stdout.strip()
    subprocess.run(["git", "-C", str(bare), "update-ref", ref, commit], check=True)


def params_for(run_id, pod="pod-a", request=None, child_name="default", child=None):
    return {"version": 1, "run_id": run_id, "request": {"tests": 6, "test_ms": 20} if request is None else request,
            "child_name": child_name, "child_digest": "fnv1a64:0000000000000000",
            "child": child or {"argv": ["x"]}, "argv": ["x"], "cwd": "/", "origin_pod": pod,
            "created_at": "2026-11-21T10:00:00Z",
            "attempts": [{"attempt": 1, "pod": pod, "started_at": "2026-11-21T10:00:01Z",
                          "ended_at": "2026-11-21T10:00:02Z", "exit_code": 143, "signal": None,
                          "outcome": "interrupted"}]}


def index_of(*test_ids):
    return "".join(json.dumps({"test_id": t, "score": 1, "duration_ms": 1, "timestamp": "t"},
                              separators=(",", ":")) + "\n" for t in test_ids)


def run_branch(bare, run_id, pod="pod-a", params_text=None, extra=(), **params):
    """An interrupted run with two of its tests done, as a shutdown checkpoint leaves it."""
    text = params_text or json.dumps(params_for(run_id, pod, **params))
    entries = [("run-params.json", blob(bare, text)), ("index.jsonl", blob(bare, index_of("t001", "t002")))]
    commit_tree(bare, f"refs/heads/inflight/{pod}/{run_id}", entries + list(extra))


HOSTILE_CHILD = {"argv": ["/bin/sh", "-c", "touch {output_dir}/../../../MARKER"], "cwd": "/",
                 "env": {"LEAK": "${INFLIGHT_GIT_TOKEN}"}, "progress_file": "../../../outside.txt"}


def config(workdir):
    """Pod B's own templates: the demo child as `default`, an env recorder, a strict one."""
    demo = {"argv": [str(DEMO), "--output", "{output_dir}", "--tests", "{tests}", "--test-ms", "{test_ms}"],
            "resume_argv": ["--resume"], "progress_file": "index.jsonl",
            "params": {"tests": {"type": "integer", "min": 0, "max": 100, "default": 6},
                       "test_ms": {"type": "integer", "min": 0, "max": 1000, "default": 20}}}
    echo = {"argv": [PYTHON, str(CHILDREN / "argv_echo.py"), "--output", "{output_dir}"],
            "env": {"FROM_CONFIG": "yes"}, "params": {"tests": {"type": "integer"},
                                                     "test_ms": {"type": "integer"}}}
    strict = {"argv": [str(DEMO), "--output", "{output_dir}", "--tests", "{tests}"],
              "params": {"tests": {"type": "integer", "required": True}}}
    path = workdir / "config.json"
    path.write_text(json.dumps({"children": {"default": demo, "echo": echo, "strict": strict}}))
    return str(path)


def all_tests_once(run_dir, count=6):
    ids = index_ids(run_dir)
    return sorted(ids) == [f"t{n:03d}" for n in range(1, count + 1)] and max(Counter(ids).values()) == 1


def test_serve_restores_the_legitimate_runs_and_only_holds_or_refuses_the_hostile_ones(
        serve_factory, tmp_path, bare_repo):
    bare = bare_repo.bare
    outside = tmp_path / "outside.txt"
    outside.write_text("kept\ntorn")
    run_branch(bare, "legit")
    run_branch(bare, "liar", child_name="echo", child=HOSTILE_CHILD)
    run_branch(bare, "unknown", child_name="nope")
    run_branch(bare, "invalid", request={"tests": -5})
    run_branch(bare, "injected", request={"tests": 6, "test_ms": 20, "extra": "--exec=sh"})
    run_branch(bare, "missing", child_name="strict", request={})
    deep = json.dumps(params_for("deep")).replace(
        '"request": {"tests": 6, "test_ms": 20}', '"request": {"x": ' + "[" * 60000 + "]" * 60000 + "}")
    run_branch(bare, "deep", params_text=deep)
    run_branch(bare, "badentry", extra=[(b"bad\xff", blob(bare, "x"))])
    subprocess.run(["git", "-C", str(bare), "update-ref", b"refs/heads/inflight/pod-\xff/x",
                    refs(bare)[b"refs/heads/inflight/pod-a/legit"]], check=True)
    filler = blob(bare, "f")
    run_branch(bare, "huge", extra=[(f"f{n:06d}", filler) for n in range(100001)])
    before = refs(bare)

    pod_b = tmp_path / "pod-b"
    pod_b.mkdir()
    serve = serve_factory("--pod-name", "pod-b", "--results-repo", bare_repo.url,
                          "--config", config(pod_b), workdir=pod_b,
                          env={"INFLIGHT_GIT_TOKEN": SECRET})
    serve.wait_ready(timeout=60)
    runs = pod_b / ".inflight" / "runs"
    for run_id in ("legit", "liar"):
        serve.wait_status(run_id, "succeeded", timeout=60)
    assert all_tests_once(runs / "legit")
    assert run_params(runs / "legit")["argv"][0] == str(DEMO)

    # The branch's program, cwd, env reference and progress file were never used.
    recorded = [json.loads(line) for line in (runs / "liar" / "argv.jsonl").read_text().splitlines()]
    assert len(recorded) == 1
    assert run_params(runs / "liar")["argv"][:2] == [PYTHON, str(CHILDREN / "argv_echo.py")]
    assert recorded[0]["env"].get("FROM_CONFIG") == "yes" and "LEAK" not in recorded[0]["env"]
    assert SECRET not in (runs / "liar" / "argv.jsonl").read_text()
    assert not list(tmp_path.rglob("MARKER"))
    assert outside.read_text() == "kept\ntorn"

    # Held: shown with the reason, never started, branch untouched.
    for run_id, reason in (("unknown", "no child template named 'nope'"),
                           ("invalid", "tests: must be at least 0"),
                           ("injected", "extra: is not a declared param"),
                           ("missing", "tests: is required")):
        status = serve.status(run_id)
        assert status["status"] == "interrupted" and reason in status["error"], status
        assert status["attempt"] == 1
        assert not (runs / run_id).exists()
        ref = f"refs/heads/inflight/pod-a/{run_id}".encode()
        assert refs(bare)[ref] == before[ref], f"{run_id}'s branch was touched"

    # Refused: logged, kept, nothing written.
    problems = " ".join(e.get("error", "") for e in serve.events() if e.get("msg") == "checkpoint not restored")
    for run_id, rule in (("deep", "nested deeper than 64"), ("badentry", "name is not UTF-8"),
                         ("huge", "more than 100000 files")):
        assert rule in problems, problems
        assert serve.get(f"/api/eval/status/{run_id}").status == 404
        assert not (runs / run_id).exists()
        ref = f"refs/heads/inflight/pod-a/{run_id}".encode()
        assert refs(bare)[ref] == before[ref]
    assert "pod-\\xff" in problems
    assert refs(bare)[b"refs/heads/inflight/pod-\xff/x"] == before[b"refs/heads/inflight/pod-\xff/x"]
    assert serve.get("/healthz").status == 200

    # What an operator sees of them: one row each, the held ones saying why.
    wait_for(lambda: not {b"refs/heads/inflight/pod-a/legit", b"refs/heads/inflight/pod-a/liar"}
             & set(refs(bare)), 30, "the finished runs' branches to be deleted")
    listed = subprocess.run([str(INFLIGHT), "checkpoints", "list", "--json", "--results-repo",
                             bare_repo.url, "--config", config(pod_b)], cwd=pod_b,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    states = {c["run_id"]: c for c in json.loads(listed.stdout)["checkpoints"]}
    assert states["unknown"]["state"] == "held" and "nope" in states["unknown"]["reason"]
    assert states["deep"]["state"] == "refused" and "nested" in states["deep"]["reason"]
    assert "legit" not in states and "liar" not in states, "finished runs' branches are deleted"
    assert "pod-\\xff" in listed.stderr


def test_one_run_id_under_two_pods_is_restored_once_and_the_other_branch_is_kept(
        serve_factory, tmp_path, bare_repo):
    bare = bare_repo.bare
    run_branch(bare, "nightly-1", pod="pod-a")
    run_branch(bare, "nightly-1", pod="pod-c", request={"tests": 9, "test_ms": 20})
    run_branch(bare, "legit")
    before = refs(bare)
    pod_b = tmp_path / "pod-b"
    pod_b.mkdir()
    serve = serve_factory("--pod-name", "pod-b", "--results-repo", bare_repo.url, workdir=pod_b)
    serve.wait_ready(timeout=60)
    runs = pod_b / ".inflight" / "runs"
    for run_id in ("legit", "nightly-1"):
        serve.wait_status(run_id, "succeeded", timeout=60)
    assert all_tests_once(runs / "legit")
    # pod-a's copy ran (ref order), alone in its dir; pod-c's branch is untouched.
    assert all_tests_once(runs / "nightly-1", count=6)
    assert run_params(runs / "nightly-1")["origin_pod"] == "pod-a"
    wait_for(lambda: b"refs/heads/inflight/pod-a/nightly-1" not in refs(bare), 30,
             "the finished run's branch to be deleted")
    after = refs(bare)
    assert after[b"refs/heads/inflight/pod-c/nightly-1"] == before[b"refs/heads/inflight/pod-c/nightly-1"]
    assert any("already restored from another pod's branch" in e.get("error", "")
               for e in serve.events() if e.get("msg") == "checkpoint not restored")


def resume(workdir, server, *args):
    return subprocess.run([str(INFLIGHT), "resume", "--log-format", "json", "--pod-name", "ops",
                           "--results-repo", server.url, "--config", config(workdir), *args],
                          cwd=workdir, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "INFLIGHT_GIT_TOKEN": SECRET})


def test_resume_runs_the_configured_template_and_refuses_what_it_cannot_run(tmp_path, bare_repo):
    bare = bare_repo.bare
    run_branch(bare, "liar", child_name="echo", child=HOSTILE_CHILD)
    run_branch(bare, "unknown", child_name="nope")
    run_branch(bare, "twin", pod="pod-a")
    run_branch(bare, "twin", pod="pod-c")
    before = refs(bare)
    ops = tmp_path / "ops"
    ops.mkdir()
    r = resume(ops, bare_repo, "inflight/pod-a/liar")
    assert r.returncode == 0, r.stderr
    recorded = json.loads((ops / ".inflight" / "runs" / "liar" / "argv.jsonl").read_text())
    assert recorded["env"]["FROM_CONFIG"] == "yes" and "LEAK" not in recorded["env"]
    assert not list(tmp_path.rglob("MARKER"))

    r = resume(ops, bare_repo, "unknown")
    assert r.returncode == 2, r.stderr
    assert "no child template named 'nope'" in r.stderr
    assert refs(bare)[b"refs/heads/inflight/pod-a/unknown"] == before[b"refs/heads/inflight/pod-a/unknown"]

    r = resume(ops, bare_repo, "twin")
    assert r.returncode == 2, r.stderr
    assert "inflight/pod-c/twin" in r.stderr
    r = resume(ops, bare_repo, "inflight/pod-c/twin")
    assert r.returncode == 0, r.stderr
    assert refs(bare)[b"refs/heads/inflight/pod-a/twin"] == before[b"refs/heads/inflight/pod-a/twin"]
    assert b"refs/heads/inflight/pod-c/twin" not in refs(bare)
