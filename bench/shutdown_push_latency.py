#!/usr/bin/python3
"""SIGTERM-to-exit of `inflight serve` holding N small runs, through a proxy
that adds 25 ms each way to a `git daemon` (a hosted git service's round trip).

serve: `inflight serve --results-repo git://<proxy>/... --checkpoint-interval 0`
with N demo runs (tests=99999, test_ms=1000) running and started; SIGTERM,
timed until serve has exited. Every run's shutdown checkpoint goes through the
proxy (and, before the end, the lease is given up).

Baseline, same run, same daemon and proxy: one `git push` of N branches, each
a commit of a small run dir of the same shape (run-params.json, console.log,
index.jsonl), timed from spawn to exit of `git push`. The commits are made
beforehand and not timed.

Repetitions alternate which goes first (default 3; --reps); medians are
reported, with the number of connections the proxy saw. Goal: serve/git <= 1.5
for N = 20 and N = 100 (issue 10). No pass/fail assertion.

The child (--child-exit-ms MS, default 75): a real eval tool takes a moment
to exit after SIGTERM (the 1.87-2.20 figures were measured with a Python
eval child). With MS > 0 the runs use a /bin/sh child (a config file with
one template, written into the temp dir) that appends a record to
index.jsonl every test_ms like the demo child and, on SIGTERM, waits MS ms,
appends one more record and exits 143. With 0 they use the built-in
template, `inflight-demo-eval`, which exits at once.
"""
import argparse
import json
import os
import shutil
import statistics
import time

import gitbench
from inflight_testing.git_servers import git
from serve_process import BenchServe

DELAY_S = 0.025
GOAL = 1.5


# $1 run dir, $2 tests, $3 test_ms, $4 seconds to take on SIGTERM before exiting
SLOW_EXIT_CHILD = r"""#!/bin/sh
out=$1 tests=$2 ms=$3 linger=$4
index="$out/index.jsonl"
mkdir -p "$out" && : > "$index"
echo "slow-exit-eval: $tests tests, 0 already done"
stop() {
  sleep "$linger"
  printf '{"test_id":"stopped","score":0}\n' >> "$index"
  echo "slow-exit-eval: stopped by signal 15 after ${linger}s"
  exit 143
}
trap stop TERM INT
pause=$((ms / 1000)).$(printf %03d $((ms % 1000)))
n=1
while [ "$n" -le "$tests" ]; do
  sleep "$pause" &
  wait $!
  printf '{"test_id":"t%05d","score":1,"duration_ms":%d}\n' "$n" "$ms" >> "$index"
  n=$((n + 1))
done
"""


def slow_exit_config(tmp, exit_ms):
    """A config whose default template is SLOW_EXIT_CHILD, with the demo's
    params (tests, test_ms); returns its path."""
    script = os.path.join(tmp, "slow-exit-child.sh")
    with open(script, "w") as f:
        f.write(SLOW_EXIT_CHILD)
    os.chmod(script, 0o755)
    config = os.path.join(tmp, "slow-exit-child.json")
    with open(config, "w") as f:
        json.dump({"child": {
            "argv": ["/bin/sh", script, "{output_dir}", "{tests}", "{test_ms}",
                     f"{exit_ms / 1000:.3f}"],
            "params": {"tests": {"type": "integer", "min": 0, "max": 99999, "default": 20},
                       "test_ms": {"type": "integer", "min": 0, "max": 86400000, "default": 500}},
            "progress_file": "index.jsonl", "progress_total": "{tests}"}}, f, indent=2)
    return config


def small_run_dir(path, run_id):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "run-params.json"), "w") as f:
        f.write(gitbench.run_params(run_id))
    with open(os.path.join(path, "console.log"), "w") as f:
        f.write("== attempt 1\n3 tests, 0 already done\n")
    with open(os.path.join(path, "index.jsonl"), "w") as f:
        for i in range(3):
            f.write(f'{{"test_id":"t{i:03d}","score":1}}\n')


def git_push_all(daemon, proxy, tmp, n, name):
    """Commits N run dirs on N branches (untimed), then times one push of all."""
    work = os.path.join(tmp, f"{name}-work")
    git(None, "init", "-q", "-b", "main", work)
    refspecs = []
    for i in range(n):
        run_id = f"g-{i:03d}"
        shutil.rmtree(os.path.join(work, "run"), ignore_errors=True)
        small_run_dir(os.path.join(work, "run"), run_id)
        git(work, "checkout", "-q", "--orphan", run_id)
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", f"inflight checkpoint {run_id} attempt 1 (shutdown)")
        refspecs.append(f"{run_id}:refs/heads/inflight/pod-g/{run_id}")
    _, _ = daemon.new_repo(f"{name}.git")
    before = proxy.connections
    t0 = time.monotonic()
    git(work, "push", "-q", daemon.url(f"{name}.git", proxy.port), *refspecs)
    return time.monotonic() - t0, proxy.connections - before


def serve_shutdown(daemon, proxy, n, name, config=None):
    daemon.new_repo(f"{name}.git")
    serve = BenchServe(["--results-repo", daemon.url(f"{name}.git", proxy.port),
                        "--checkpoint-interval", "0", "--max-concurrent", str(n),
                        "--grace-period", "60s", "--pod-name", "bench",
                        *(["--config", config] if config else [])])
    try:
        serve.start_long_runs(n, name)
        before = proxy.connections
        t0 = time.monotonic()
        code = serve.stop(timeout=120)
        took = time.monotonic() - t0
        if code != 0:
            raise RuntimeError(f"serve exited {code}: " + "".join(serve.lines[-20:]))
        bare = os.path.join(daemon.base, f"{name}.git")
        refs = git(bare, "for-each-ref", "--format=%(refname)", "refs/heads/inflight/").splitlines()
        if len(refs) != n:
            raise RuntimeError(f"{len(refs)} branches pushed, not {n}")
        if config:  # the record the child wrote while exiting made it into every checkpoint
            for ref in refs:
                if '"stopped"' not in git(bare, "show", f"{ref}:index.jsonl").splitlines()[-1]:
                    raise RuntimeError(f"{ref}: the child's last record is not in its checkpoint")
        stopped = serve.logged("children stopped")["seconds"]
        return took, proxy.connections - before, stopped
    finally:
        serve.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--runs", type=int, nargs="+", default=[20, 100])
    ap.add_argument("--child-exit-ms", type=int, default=75,
                    help="ms the child takes to exit after SIGTERM (0: inflight-demo-eval)")
    args = ap.parse_args()
    with gitbench.workspace("inflight-bench-latency-", proxy_delay=DELAY_S) as (tmp, daemon, proxy):
        config = slow_exit_config(tmp, args.child_exit_ms) if args.child_exit_ms > 0 else None
        print(f"shutdown_push_latency: git daemon behind a proxy adding {DELAY_S * 1000:.0f} ms "
              f"each way, {args.reps} repetitions, medians")
        print("  child: " + (f"/bin/sh script that takes {args.child_exit_ms} ms to exit after "
                             f"SIGTERM (appends a record, exits 143)" if config else
                             "inflight-demo-eval (exits at once on SIGTERM)"))
        for n in args.runs:
            ours, theirs = gitbench.alternate(
                args.reps, lambda rep: serve_shutdown(daemon, proxy, n, f"s{n}-{rep}", config),
                lambda rep: git_push_all(daemon, proxy, tmp, n, f"g{n}-{rep}"))
            a, b = (statistics.median(r[0] for r in x) for x in (ours, theirs))
            stopped = statistics.median(r[2] for r in ours)
            print(f"  {n:3d} runs: serve SIGTERM->exit {a * 1000:7.0f} ms ({ours[-1][1]} connections,"
                  f" children stopped at {stopped * 1000:.0f} ms)"
                  f" | git push of {n} branches {b * 1000:6.0f} ms ({theirs[-1][1]} connection(s))"
                  f" | ratio {a / b:.2f} (goal <= {GOAL})")


if __name__ == "__main__":
    main()
