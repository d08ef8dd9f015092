#!/usr/bin/python3
"""Bytes a periodic checkpoint sends after 50 short records were appended to a
large progress file, and the restore of that file.

Run dir: index.jsonl of --mb MB (~100-byte JSON records, seeded RNG; default
5 and 200) and run-params.json. A byte-counting TCP proxy on 127.0.0.1 sits
between the pusher and `git daemon` and counts client->server bytes per save.

inflight: save #1 (reason shutdown, the full first checkpoint) with a fresh
cache dir; append 50 records (~100 bytes each) to index.jsonl; save #2
(reason periodic) from the same cache dir, each by its own
`inflight-checkpoint-agent` as serve does. Measured: the client->server bytes
of save #2 (the git:// request line, ref update command and pack). The
pushed branch is checked: save #2's parent is save #1, and its tree equals
the run dir (chunks reassembled). Then restores by another pod (a fresh
agent, empty cache and runs dir: list, fetch, claim, write the run dir),
timed from spawn to exit, each restored file checked byte for byte; --reps
of them (default 5) alternated with the baseline's fetches, medians compared
(a fetch of 200 MB on this machine varies by a third from one to the next).

Baseline, same run, through the same proxy to a fresh bare repo: the git CLI
pushing an identical run dir (init, add, commit, push), then the same 50
records appended, `git commit -a`, `git push`; its second push is the
baseline of bytes (git CLI sends thin packs: the new blob as a delta against
the one the server has). The restore's baseline is `git fetch` of inflight's
branch into an empty bare repo (the same objects on the same server; no
checkout), timed from spawn to exit; `git fetch` of the git CLI's branch (one
blob the server holds loose and must deflate again) is printed for context.

Byte counts are deterministic up to commit timestamps, so one measurement
is made. Goals: sent <= 2 x appended + 64 KiB; restore <= fetch. No
pass/fail assertion.
"""
import argparse
import filecmp
import os
import random
import shutil
import statistics
import sys
import time

import gitbench
from inflight_testing.git_servers import git

BRANCH = "refs/heads/inflight/pod-a/r1"
APPEND_LINES = 50


def make_progress_dir(path, size, seed=7):
    rng = random.Random(seed)
    os.makedirs(path)
    n = i = 0
    with open(os.path.join(path, "index.jsonl"), "w") as f:
        while n < size:
            line = gitbench.progress_line(rng, i)
            f.write(line)
            n += len(line)
            i += 1
    with open(os.path.join(path, "run-params.json"), "w") as f:
        f.write(gitbench.resumable_run_params("r1"))
    return i


def append_records(path, first, seed=8):
    rng = random.Random(seed)
    text = "".join(gitbench.progress_line(rng, first + k) for k in range(APPEND_LINES))
    with open(os.path.join(path, "index.jsonl"), "a") as f:
        f.write(text)
    return len(text.encode())


def measured(proxy, action):
    """(client->server bytes, server->client bytes, connections, seconds, result) of action()."""
    up0, down0, conns0 = proxy.settled()
    t0 = time.monotonic()
    result = action()
    elapsed = time.monotonic() - t0
    up1, down1, conns1 = proxy.settled()
    return up1 - up0, down1 - down0, conns1 - conns0, elapsed, result


def inflight_saves(tmp, daemon, proxy, run_dir, records):
    """Save #1, the append, save #2; returns (appended, up1, (up2, down2, conns2, secs2))."""
    bare, _ = daemon.new_repo("inflight.git")
    url = daemon.url("inflight.git", port=proxy.port)
    cache = os.path.join(tmp, "cache.git")
    up1, _, _, _, (_, r1) = measured(
        proxy, lambda: gitbench.agent_save(run_dir, cache, url, reason="shutdown"))
    appended = append_records(run_dir, records)
    up2, down2, c2, t2, (_, r2) = measured(
        proxy, lambda: gitbench.agent_save(run_dir, cache, url, reason="periodic"))
    r1, r2 = r1.get("answer", {}), r2.get("answer", {})  # the agent's answer holds the commit
    if not r1.get("commit") or not r2.get("commit"):
        raise RuntimeError(f"a save made no commit: {r1} {r2}")
    parent = git(bare, "rev-parse", f"{BRANCH}^").strip()
    ok, detail = gitbench.tree_matches_dir(bare, BRANCH, run_dir)
    print(f"  check: save #2 parent is save #1: {parent == r1['commit']}; tree "
          f"{'matches' if ok else 'DIFFERS FROM'} the run dir ({detail})")
    if parent != r1["commit"] or not ok:
        raise RuntimeError("save #2 is not the run dir on top of save #1")
    # What save #2 pushed: its new objects and their zlib sizes on the server
    # (a push of < 100 objects is unpacked into loose objects there).
    listing = git(bare, "rev-list", "--objects", f"{BRANCH}^..{BRANCH}")
    sizes = git(bare, "cat-file", "--batch-check=%(objecttype) %(objectsize) "
                "%(objectsize:disk) %(rest)", input=listing)
    print("  save #2 new objects (type, size, zlib size, path):")
    for line in sizes.splitlines():
        print("    " + line)
    return appended, up1, (up2, down2, c2, t2), url


def git_cli_pushes(tmp, daemon, proxy, git_dir, records):
    """The git CLI's first push and push of the append; returns (appended, up1, up2, url)."""
    gbare, _ = daemon.new_repo("cli.git")
    gurl = daemon.url("cli.git", port=proxy.port)
    gd = ["--git-dir", os.path.join(tmp, "cli-work.git"), "--work-tree", git_dir]

    def first_push():
        git(None, *gd, "init", "-q", "-b", "main")
        git(None, *gd, "add", "-A")
        git(None, *gd, "commit", "-q", "-m", "checkpoint 1")
        git(None, *gd, "push", "-q", gurl, f"main:{BRANCH}")

    gup1, _, _, _, _ = measured(proxy, first_push)
    gappended = append_records(git_dir, records)
    git(None, *gd, "commit", "-q", "-a", "-m", "checkpoint 2")
    gup2, _, _, _, _ = measured(proxy, lambda: git(None, *gd, "push", "-q", gurl,
                                                   f"main:{BRANCH}"))
    gok, gdetail = gitbench.tree_matches_dir(gbare, BRANCH, git_dir)
    print(f"  check git CLI: tree {'matches' if gok else 'DIFFERS FROM'} the run dir ({gdetail})")
    return gappended, gup1, gup2, gurl


def git_fetch(tmp, name, url):
    fetched = os.path.join(tmp, name)
    git(None, "init", "-q", "--bare", fetched)
    t0 = time.monotonic()
    git(fetched, "fetch", "-q", url, f"{BRANCH}:{BRANCH}")
    took = time.monotonic() - t0
    shutil.rmtree(fetched)
    return took


def restore(tmp, url, run_dir, rep):
    """Seconds of one restore by another pod, checked byte for byte."""
    runs, cache = os.path.join(tmp, f"restored{rep}"), os.path.join(tmp, f"cache-b{rep}.git")
    took, result = gitbench.agent_restore(runs, cache, url)
    claimed = [c.get("run_id") for c in result["answer"].get("claimed", [])]
    same = filecmp.cmp(os.path.join(runs, "r1", "index.jsonl"),
                       os.path.join(run_dir, "index.jsonl"), shallow=False)
    print(f"  check restore {rep}: claimed {claimed}; index.jsonl "
          f"{'identical' if same else 'DIFFERS'}; {took * 1000:.0f} ms")
    if claimed != ["r1"] or not same:
        raise RuntimeError(f"restore did not take the run whole: {result}")
    shutil.rmtree(runs)
    shutil.rmtree(cache)
    return took


def restores(tmp, url, gurl, run_dir, reps):
    """Median seconds of: inflight's restore and `git fetch` of the same branch,
    alternated; `git fetch` of the git CLI's branch, once."""
    ours, theirs = gitbench.alternate(
        reps, lambda rep: restore(tmp, url, run_dir, rep),
        lambda rep: git_fetch(tmp, f"fetched{rep}.git", url))
    print(f"  restores {', '.join(f'{t * 1000:.0f}' for t in ours)} ms; git fetches "
          f"{', '.join(f'{t * 1000:.0f}' for t in theirs)} ms")
    return (statistics.median(ours), statistics.median(theirs),
            git_fetch(tmp, "fetched-cli.git", gurl))


def measure(mb, reps):
    with gitbench.workspace("inflight-bench-bytes-", proxy_delay=0) as (tmp, daemon, proxy):
        run_dir, git_dir = os.path.join(tmp, "run"), os.path.join(tmp, "run-git")
        records = make_progress_dir(run_dir, mb * 1_000_000)
        make_progress_dir(git_dir, mb * 1_000_000)
        size = os.path.getsize(os.path.join(run_dir, "index.jsonl"))
        print(f"periodic_bytes: index.jsonl {size} bytes ({records} records) + run-params.json; "
              f"git daemon on :{daemon.port}, counting proxy on :{proxy.port}")
        appended, up1, (up2, down2, c2, t2), url = inflight_saves(tmp, daemon, proxy, run_dir,
                                                                  records)
        gappended, gup1, gup2, gurl = git_cli_pushes(tmp, daemon, proxy, git_dir, records)
        assert gappended == appended
        restore_s, fetch_s, cli_fetch_s = restores(tmp, url, gurl, run_dir, reps)

        goal = 2 * appended + 64 * 1024
        print(f"  appended: {APPEND_LINES} records, {appended} bytes")
        print(f"  inflight save #1 (full, context): {up1} bytes sent")
        print(f"  inflight save #2 (periodic):      {up2} bytes sent, {down2} received, "
              f"{c2} connection(s), {t2 * 1000:.0f} ms")
        print(f"  git CLI first push (context):     {gup1} bytes sent")
        print(f"  git CLI push of the append:       {gup2} bytes sent")
        print(f"  goal: sent <= 2 x appended + 64 KiB = {goal} bytes -> "
              f"{'met' if up2 <= goal else 'MISSED'}")
        print(f"  restore by another pod (median of {reps}) {restore_s * 1000:.0f} ms | git fetch "
              f"of that branch (median) "
              f"{fetch_s * 1000:.0f} ms | git fetch of the git CLI's branch (context) "
              f"{cli_fetch_s * 1000:.0f} ms")
        print(f"RATIO {mb} MB inflight sent/appended = {up2 / appended:.2f}")
        print(f"RATIO {mb} MB git-cli sent/appended = {gup2 / appended:.2f}")
        print(f"RATIO {mb} MB inflight/git-cli sent = {up2 / gup2:.2f}")
        print(f"RATIO {mb} MB restore/git fetch = {restore_s / fetch_s:.2f} (goal <= 1)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, nargs="+", default=[5, 200])
    ap.add_argument("--reps", type=int, default=5,
                    help="restores and `git fetch`es, alternated; medians compared")
    args = ap.parse_args()
    for mb in args.mb:
        measure(mb, args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
