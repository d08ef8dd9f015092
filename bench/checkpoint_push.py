#!/usr/bin/python3
"""First checkpoint push of a 6.3 MB / 1,005-file run dir to a git daemon.

inflight: one `inflight-checkpoint-agent` save request (reason shutdown) with a
fresh cache dir, pushing to a fresh bare repo served by `git daemon` over
git://127.0.0.1; timed from spawn to exit (snapshot into the cache repo,
chunking of files > 64 KiB, pack, push).

Baseline, same run, same daemon, fresh bare repo: the git CLI doing
`git init` + `git add -A` + `git commit` + `git push` of the same dir (its
git dir kept outside the run dir via --git-dir/--work-tree), timed from the
spawn of `git init` to the exit of `git push`.

The run dir (seeded RNG, same bytes every run): cases/case-0000..0999.txt of
6,000 bytes of random-word text, index.jsonl (300 KB of ~100-byte JSON
records), run-params.json, console.log, summary.json, metrics.csv.

One unmeasured warm-up of each, then repetitions alternating which goes
first (default 5; BENCH_PUSH_REPS or --reps); medians are reported. The first
measured repetition checks that each pushed branch holds exactly the dir's
files (`git archive` of the branch, inflight's chunk dirs reassembled).
Goal: inflight/git <= 0.35. No pass/fail assertion.
"""
import argparse
import hashlib
import os
import statistics
import sys
import time
import zlib

import gitbench
from inflight_testing.git_servers import git

GOAL = 0.35
BRANCH = "refs/heads/inflight/pod-a/r1"


def hash_compress_floor(run_dir):
    """Seconds to read every file of run_dir once, SHA-1 it as a git blob and
    deflate it at zlib level 1: what any checkpoint of the dir must do."""
    t0 = time.monotonic()
    for root, _, names in os.walk(run_dir):
        for name in names:
            with open(os.path.join(root, name), "rb") as f:
                data = f.read()
            hashlib.sha1(b"blob %d\0" % len(data) + data).digest()
            zlib.compress(data, 1)
    return time.monotonic() - t0


def push_inflight(daemon, tmp, run_dir, name):
    bare, url = daemon.new_repo(f"{name}.git")
    cache = os.path.join(tmp, f"{name}-cache.git")
    elapsed, result = gitbench.agent_save(run_dir, cache, url)
    if not result.get("answer", {}).get("commit"):
        raise RuntimeError(f"first save made no commit: {result}")
    return elapsed, bare


def push_git(daemon, tmp, run_dir, name):
    bare, url = daemon.new_repo(f"{name}.git")
    gd = ["--git-dir", os.path.join(tmp, f"{name}-work.git"), "--work-tree", run_dir]
    t0 = time.monotonic()
    git(None, *gd, "init", "-q", "-b", "main")
    git(None, *gd, "add", "-A")
    git(None, *gd, "commit", "-q", "-m", "inflight checkpoint r1 attempt 1 (shutdown)")
    git(None, *gd, "push", "-q", url, f"main:{BRANCH}")
    return time.monotonic() - t0, bare


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=int(os.environ.get("BENCH_PUSH_REPS", "5")))
    args = ap.parse_args()

    with gitbench.workspace("inflight-bench-push-") as (tmp, daemon, _):
        run_dir = os.path.join(tmp, "run")
        files, size = gitbench.make_run_dir(run_dir)
        print(f"checkpoint_push: run dir of {files} files, {size / 1e6:.2f} MB -> git daemon "
              f"(git://127.0.0.1:{daemon.port}), {args.reps} repetitions + 1 warm-up")
        push_inflight(daemon, tmp, run_dir, "warm-inflight")
        push_git(daemon, tmp, run_dir, "warm-git")

        ours, theirs = [], []
        for rep in range(1, args.reps + 1):
            order = [("inflight", push_inflight), ("git", push_git)]
            if rep % 2 == 0:
                order.reverse()
            got = {}
            for label, push in order:
                got[label] = push(daemon, tmp, run_dir, f"rep{rep}-{label}")
            ours.append(got["inflight"][0])
            theirs.append(got["git"][0])
            print(f"  rep {rep} ({order[0][0]} first): inflight {got['inflight'][0] * 1000:8.1f} ms"
                  f"   git CLI {got['git'][0] * 1000:8.1f} ms")
            if rep == 1:
                for label in ("inflight", "git"):
                    bare = got[label][1]
                    ok, detail = gitbench.tree_matches_dir(bare, BRANCH, run_dir)
                    entries = len(git(bare, "ls-tree", "-r", BRANCH).splitlines())
                    print(f"  check {label}: {BRANCH} {'matches' if ok else 'DIFFERS FROM'} the "
                          f"run dir ({detail}; {entries} tree entries)")
                    if not ok:
                        return 1
        mo, mt = statistics.median(ours), statistics.median(theirs)
        print(f"  median inflight agent: {mo * 1000:.1f} ms   (min {min(ours) * 1000:.1f}, "
              f"max {max(ours) * 1000:.1f})")
        print(f"  median git CLI init+add+commit+push: {mt * 1000:.1f} ms   "
              f"(min {min(theirs) * 1000:.1f}, max {max(theirs) * 1000:.1f})")
        print(f"  goal: inflight/git <= {GOAL}")
        print(f"RATIO inflight/git (medians) = {mo / mt:.2f}")
        return 0


if __name__ == "__main__":
    sys.exit(main())
