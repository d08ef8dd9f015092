#!/usr/bin/python3
"""First checkpoint of a 6.3 MB / 1,005-file run dir as the user waits for
it: SIGTERM -> exit of `inflight serve`.

serve: `inflight serve --checkpoint-interval 0` against a `git daemon`, one
run whose child (a config template: `sh -c 'cp -R <dir>/. <output_dir>;
exec sleep'`) has copied the bench dir of checkpoint_push.py into its run
dir and sleeps; SIGTERM, timed until serve has exited. The push is the run's
first: the results repo and the cache are empty.

Baselines in the same run, on the run dir serve pushed: the git CLI's
init + add + commit + push to a fresh repo on the same daemon (as in
checkpoint_push.py), and the hash+compress floor (SHA-1 and zlib level 1
over every byte once, in this process). Repetitions alternate which goes
first; medians. Goals (issue 10): serve/git <= 0.35, serve/floor <= 2.5.
"""
import argparse
import json
import os
import shutil
import statistics
import time

import gitbench
from checkpoint_push import hash_compress_floor, push_git
from inflight_testing.git_servers import git
from inflight_testing.waiting import wait_for
from serve_process import BenchServe

GOAL = 0.35
FLOOR_GOAL = 2.5


def source_dir(tmp):
    """The bench dir without the files serve writes itself."""
    src = os.path.join(tmp, "src")
    gitbench.make_run_dir(src)
    for own in ("run-params.json", "console.log"):
        os.remove(os.path.join(src, own))
    return src


def write_config(tmp, src):
    path = os.path.join(tmp, "config.json")
    with open(path, "w") as f:
        json.dump({"child": {
            "argv": ["/bin/sh", "-c", 'cp -R "$0"/. "$1" && : > "$1/.copied"; exec sleep 100000',
                     src, "{output_dir}"],
            "progress_file": "index.jsonl"}}, f)
    return path


def serve_first_push(daemon, tmp, config, name):
    """Seconds from SIGTERM to exit, and the run dir serve pushed (kept)."""
    bare, url = daemon.new_repo(f"{name}.git")
    serve = BenchServe(["--config", config, "--results-repo", url, "--checkpoint-interval", "0",
                        "--pod-name", "pod-a"])
    try:
        serve.wait_ready(10)
        serve.submit(id="r1")
        run_dir = os.path.join(serve.runs_dir, "r1")
        wait_for(lambda: os.path.exists(os.path.join(run_dir, ".copied")), 60, "the copy")
        t0 = time.monotonic()
        code = serve.stop(timeout=120)
        took = time.monotonic() - t0
        if code != 0:
            raise RuntimeError(f"serve exited {code}: " + "".join(serve.lines[-20:]))
        if not git(bare, "for-each-ref", "refs/heads/inflight/pod-a/r1"):
            raise RuntimeError("no branch pushed")
        kept = os.path.join(tmp, f"{name}-run")
        shutil.copytree(run_dir, kept)
        return took, kept
    finally:
        serve.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=int(os.environ.get("BENCH_PUSH_REPS", "5")))
    args = ap.parse_args()
    with gitbench.workspace("inflight-bench-first-push-") as (tmp, daemon, _):
        config = write_config(tmp, source_dir(tmp))
        ours, theirs, floors = [], [], []
        for rep in range(args.reps):
            took, run_dir = serve_first_push(daemon, tmp, config, f"s{rep}")
            steps = [lambda: ours.append(took),
                     lambda: theirs.append(push_git(daemon, tmp, run_dir, f"g{rep}")[0]),
                     lambda: floors.append(hash_compress_floor(run_dir))]
            for step in steps if rep % 2 == 0 else reversed(steps):
                step()
        a, b, c = (statistics.median(x) for x in (ours, theirs, floors))
        files, size = gitbench.dir_stats(run_dir)
        print(f"first_push_latency: {files} files, {size / 1e6:.2f} MB, {args.reps} repetitions, "
              f"medians")
        print(f"  serve SIGTERM->exit {a * 1000:6.0f} ms | git init+add+commit+push "
              f"{b * 1000:6.0f} ms | hash+compress floor {c * 1000:5.0f} ms")
        print(f"RATIO serve/git = {a / b:.2f} (goal <= {GOAL})")
        print(f"RATIO serve/floor = {a / c:.2f} (goal <= {FLOOR_GOAL})")


if __name__ == "__main__":
    main()
