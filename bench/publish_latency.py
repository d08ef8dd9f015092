#!/usr/bin/python3
"""Publishing a finished 6.3 MB / 1,005-file run as its pod waits for it:
the final checkpoint, the result and its index entry, and the branch's
deletion (one `release` of `inflight-checkpoint-agent`, spawn to exit).

The run was checkpointed while it ran (one save, not timed), as serve does,
and its run-params.json says it succeeded. Baseline in the same run: the git
CLI's init + add + commit + push of the same dir to a fresh repo on the same
daemon (checkpoint_push.py's), as the user waits for it. Repetitions
alternate which goes first; medians. Goal (issue 25): inflight/git <= 1.2.
"""
import argparse
import os
import shutil

import gitbench
from checkpoint_push import push_git
from inflight_testing.git_servers import git
from runs_list import run_params

GOAL = 1.2


def finished_run_dir(tmp):
    run_dir = os.path.join(tmp, "run")
    files, size = gitbench.make_run_dir(run_dir)
    with open(os.path.join(run_dir, "run-params.json"), "w") as f:
        f.write(run_params("r1", "pod-a", "succeeded"))
    return run_dir, files, size


def publish_inflight(daemon, tmp, run_dir, name):
    bare, url = daemon.new_repo(f"{name}.git")
    cache = os.path.join(tmp, f"{name}-cache.git")
    gitbench.agent_save(run_dir, cache, url, reason="periodic")
    seconds, _ = gitbench.agent_save(run_dir, cache, url, reason="final", op="release")
    if not git(bare, "for-each-ref", "refs/inflight-results/r1"):
        raise RuntimeError("the release published nothing")
    if git(bare, "for-each-ref", "refs/heads/inflight/"):
        raise RuntimeError("the release left the branch")
    shutil.rmtree(cache)
    return seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=int(os.environ.get("BENCH_PUSH_REPS", "5")))
    args = ap.parse_args()
    with gitbench.workspace("inflight-bench-publish-") as (tmp, daemon, _):
        run_dir, files, size = finished_run_dir(tmp)
        print(f"publish_latency: run dir of {files} files, {size / 1e6:.2f} MB -> git daemon "
              f"(git://127.0.0.1:{daemon.port}), {args.reps} repetitions + 1 warm-up")
        publish_inflight(daemon, tmp, run_dir, "warm-inflight")
        push_git(daemon, tmp, run_dir, "warm-git")
        ours, theirs = gitbench.alternate(
            args.reps, lambda r: publish_inflight(daemon, tmp, run_dir, f"inflight-{r}"),
            lambda r: push_git(daemon, tmp, run_dir, f"git-{r}")[0])
    gitbench.report("publish", "inflight release (final + publish + delete)", ours,
                    "git init + add + commit + push", theirs, GOAL)

if __name__ == "__main__":
    main()
