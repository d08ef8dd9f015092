#!/usr/bin/python3
"""`inflight runs list --json` over a fleet's results repo, as an operator
waits for it on a machine with nothing but the URL.

The repo (written once with `git fast-import`): 1,000 published runs (a
result ref each, a small run dir, and one entry each in the inflight-index
branch), 100 live runs (a checkpoint branch each, of 10 pods) and the 10
pods' leases. inflight: `inflight runs list --json` from an empty directory
(a fresh cache), timed from spawn to exit; it must list 1,100 runs. Baseline
in the same run: what the git CLI needs for the same view, `git ls-remote`
plus a `git fetch` of the index branch into a fresh repo, as the user waits
for both. Repetitions alternate which goes first; medians. Goal (issue 25):
inflight/git <= 2.
"""
import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time

import gitbench
from inflight_testing.git_servers import git
from serve_process import bin_dir

GOAL = 2.0
PUBLISHED, LIVE, PODS = 1000, 100, 10


def run_params(run_id, pod, final_status=None):
    params = {"version": 1, "run_id": run_id, "request": {"tests": 20}, "child_name": "default",
              "child_digest": "", "child": {}, "argv": ["inflight-demo-eval"], "cwd": ".",
              "origin_pod": pod, "created_at": "2026-11-26T00:00:00Z",
              "attempts": [{"attempt": 1, "pod": pod, "started_at": "2026-11-26T00:00:01Z",
                            "ended_at": "2026-11-26T00:05:00Z" if final_status else None,
                            "exit_code": 0 if final_status else None, "signal": None,
                            "outcome": final_status}]}
    if final_status:
        params["final_status"] = final_status
    return json.dumps(params, indent=2) + "\n"


def index_entry(run_id, pod):
    return json.dumps({"id": run_id, "final_status": "succeeded", "pod": pod,
                       "attempts": [{"pod": pod, "outcome": "succeeded",
                                     "started": "2026-11-26T00:00:01Z",
                                     "ended": "2026-11-26T00:05:00Z"}],
                       "records": 20, "total": None, "created_at": "2026-11-26T00:00:00Z",
                       "finished_at": "2026-11-26T00:05:00Z",
                       "result": f"refs/inflight-results/{run_id}"}, indent=2) + "\n"


def records(n):
    return "".join(json.dumps({"test_id": f"t{i:03d}", "score": 0.5}) + "\n" for i in range(n))


class FastImport:
    """A fast-import stream of commits whose files are given inline."""

    def __init__(self):
        self.parts = []
        self.mark = 0

    def commit(self, ref, files, message, parent_mark=None):
        self.mark += 1
        head = (f"commit {ref}\nmark :{self.mark}\n"
                f"committer inflight <inflight@localhost> 1795650000 +0000\n")
        self.parts.append(head.encode() + data(message))
        if parent_mark:
            self.parts.append(f"from :{parent_mark}\n".encode())
        for path, text in files.items():
            self.parts.append(f"M 100644 inline {path}\n".encode() + data(text))
        self.parts.append(b"\n")
        return self.mark

    def bytes(self):
        return b"".join(self.parts)


def data(text):
    raw = text.encode()
    return f"data {len(raw)}\n".encode() + raw + b"\n"


def fill_repo(bare):
    stream = FastImport()
    entries = {}
    for i in range(PUBLISHED):
        run_id, pod = f"done-{i:04d}", f"pod-{i % PODS}"
        stream.commit(f"refs/inflight-results/{run_id}",
                      {"run-params.json": run_params(run_id, pod, "succeeded"),
                       "index.jsonl": records(20), "console.log": f"{run_id}: all done\n"},
                      f"inflight result {run_id} (succeeded)\n\nInflight-Pod: {pod}\n")
        entries[f"runs/{run_id}.json"] = index_entry(run_id, pod)
    stream.commit("refs/heads/inflight-index", entries, "inflight index\n")
    for i in range(LIVE):
        run_id, pod = f"live-{i:04d}", f"pod-{i % PODS}"
        stream.commit(f"refs/heads/inflight/{pod}/{run_id}",
                      {"run-params.json": run_params(run_id, pod), "index.jsonl": records(10)},
                      f"inflight checkpoint {run_id} attempt 1 (periodic)\n\n"
                      f"Inflight-Pod: {pod}\nInflight-Attempt: 1\nInflight-Records: 10\n")
    for p in range(PODS):
        stream.commit(f"refs/heads/inflight-lease/pod-{p}", {},
                      f"inflight lease pod-{p}\n\nInflight-Pod: pod-{p}\n"
                      f"Inflight-Lease-Until: 1795659999\n")
    subprocess.run(["git", "-C", bare, "fast-import", "--quiet"], input=stream.bytes(), check=True)


def list_inflight(tmp, url, rep):
    cwd = tempfile.mkdtemp(dir=tmp, prefix=f"operator-{rep}-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFLIGHT_")}
    t0 = time.monotonic()
    out = subprocess.run([os.path.join(bin_dir(), "inflight"), "runs", "list", "--json",
                          "--results-repo", url], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=300)
    elapsed = time.monotonic() - t0
    if out.returncode != 0:
        raise RuntimeError(f"runs list exit {out.returncode}: {out.stderr}")
    listed = len(json.loads(out.stdout)["runs"])
    if listed != PUBLISHED + LIVE:
        raise RuntimeError(f"runs list showed {listed} runs, not {PUBLISHED + LIVE}")
    shutil.rmtree(cwd)
    return elapsed


def list_git(tmp, url, rep):
    repo = os.path.join(tmp, f"git-{rep}")
    git(None, "init", "-q", "--bare", repo)
    t0 = time.monotonic()
    git(None, "ls-remote", url)
    git(repo, "fetch", "-q", url, "refs/heads/inflight-index:refs/heads/inflight-index")
    elapsed = time.monotonic() - t0
    shutil.rmtree(repo)
    return elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=int(os.environ.get("BENCH_REPS", "5")))
    args = ap.parse_args()
    with gitbench.workspace("inflight-bench-runs-list-") as (tmp, daemon, _):
        bare, url = daemon.new_repo("fleet.git")
        fill_repo(bare)
        print(f"runs_list: {PUBLISHED} published and {LIVE} live runs of {PODS} pods on "
              f"{url}, {args.reps} repetitions + 1 warm-up")
        list_inflight(tmp, url, "warm")
        list_git(tmp, url, "warm")
        ours, theirs = gitbench.alternate(args.reps, lambda r: list_inflight(tmp, url, r),
                                          lambda r: list_git(tmp, url, r))
    gitbench.report("runs_list", "inflight runs list --json", ours,
                    "git ls-remote + fetch of the index", theirs, GOAL)

if __name__ == "__main__":
    main()
