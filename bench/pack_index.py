#!/usr/bin/python3
"""The agent's own pack indexing against `git index-pack`, on the same pack.

A restore's download is indexed by the agent itself (docs/checkpoints.md "How checkpoints are stored"): each object inflated once and hashed with libcrypto's SHA-1, deltas
against objects of the same pack applied with each base made once. Two packs:

- whole: 200 MB of progress records in 32 KiB chunks (the records of
  bench/periodic_bytes.py), committed as files, packed without deltas, as
  checkpoints are pushed;
- deltas: 3,000 32 KiB chunks of eval records that repeat 40 prompts (random
  ids, scores and outputs), after `git repack -a -d -f --depth=50`: a server
  that repacks deltifies nearly every chunk, in chains up to 50 long.

Each pack comes from `git pack-objects --stdout --delta-base-offset`, as a
fetch gets it. Measured, alternated, --reps times (default 5), medians
compared: `pack_index_bench` (build/bin; the indexing alone, from memory in
pieces of 64 KiB) and `git index-pack --threads=1` and with git's default
threads, timed spawn to exit. The .idx files must be the same bytes.
No pass/fail assertion; goal: ours <= git index-pack on one thread.
"""
import argparse
import filecmp
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import gitbench
from inflight_testing.git_servers import git, git_env
from serve_process import bin_dir

CHUNK = 32 << 10


def write_chunks(path, lines, count):
    """`count` files of CHUNK bytes cut from the stream of `lines`."""
    os.makedirs(path)
    text = ""
    for n in range(count):
        while len(text) < CHUNK:
            text += next(lines)
        with open(os.path.join(path, f"{n:06d}"), "w") as f:
            f.write(text[:CHUNK])
        text = text[CHUNK:]


def progress_lines(seed=7):
    rng = random.Random(seed)
    i = 0
    while True:
        yield gitbench.progress_line(rng, i)
        i += 1


def eval_records(seed=3):
    rng = random.Random(seed)
    prompts = [("Explain the following code and list every bug you find in it, with line "
                "numbers. " * 3) + str(i) for i in range(40)]
    while True:
        output = "".join(rng.choice("abcdefghij ") for _ in range(rng.randrange(40, 200)))
        yield (f'{{"test_id": "case-{rng.randrange(10**6)}", "prompt": "{rng.choice(prompts)}", '
               f'"score": {rng.random():.3f}, "output": "{output}"}}\n')


def make_pack(tmp, name, lines, count, repack_args):
    repo = os.path.join(tmp, name)
    write_chunks(os.path.join(repo, "c"), lines, count)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", name)
    git(repo, "repack", "-a", "-d", "-q", *repack_args)
    pack = os.path.join(tmp, f"{name}.pack")
    with open(pack, "wb") as out:
        subprocess.run(["git", "-C", repo, "pack-objects", "--stdout", "--delta-base-offset",
                        "--revs", "-q"], input=b"HEAD\n", stdout=out, env=git_env(), check=True)
    return pack


def ours(pack, idx):
    out = subprocess.run([os.path.join(bin_dir(), "pack_index_bench"), pack, "1", idx],
                         capture_output=True, text=True, check=True).stdout
    return float(out.split()[0]) / 1000


def index_pack(pack, idx, threads):
    args = ["git", "index-pack", "-o", idx] + ([f"--threads={threads}"] if threads else []) + [pack]
    t0 = time.monotonic()
    subprocess.run(args, stdout=subprocess.DEVNULL, env=git_env(), check=True)
    return time.monotonic() - t0


def measure(tmp, name, pack, reps):
    ours_idx, git_idx = os.path.join(tmp, f"{name}-ours.idx"), os.path.join(tmp, f"{name}-git.idx")
    mine, one, default = gitbench.alternate(
        reps, lambda rep: ours(pack, ours_idx), lambda rep: index_pack(pack, git_idx, 1),
        lambda rep: index_pack(pack, git_idx, None))
    same = filecmp.cmp(ours_idx, git_idx, shallow=False)
    print(f"{name}: pack {os.path.getsize(pack):,} bytes; .idx {'the same' if same else 'DIFFERENT'}")
    for label, runs in (("ours", mine), ("git index-pack --threads=1", one),
                        ("git index-pack", default)):
        print(f"  {label}: median {statistics.median(runs) * 1000:.0f} ms "
              f"({', '.join(f'{s * 1000:.0f}' for s in runs)})")
    print(f"RATIO {name} ours/git index-pack one thread = "
          f"{statistics.median(mine) / statistics.median(one):.2f} (goal <= 1); "
          f"ours/git index-pack = {statistics.median(mine) / statistics.median(default):.2f}")
    if not same:
        raise RuntimeError(f"{name}: our .idx differs from git's")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pack-index-") as tmp:
        packs = {
            "whole": make_pack(tmp, "whole", progress_lines(), (200 << 20) // CHUNK,
                               ["-F", "--window=0"]),
            "deltas": make_pack(tmp, "deltas", eval_records(), 3000,
                                ["-f", "--window=10", "--depth=50"]),
        }
        for name, pack in packs.items():
            measure(tmp, name, pack, args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
