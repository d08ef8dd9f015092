"""What the checkpoint benchmarks share (stdlib only; not a benchmark). The
git daemon, the git CLI and the proxies come from the test support package
(inflight_testing.git_servers, .proxies).

- make_run_dir: the deterministic 1,005-file run dir (seeded RNG)
- workspace: a temp dir, a git daemon and optionally a proxy, removed after
- alternate: repetitions of measures whose order alternates
- agent_save: one `inflight-checkpoint-agent` save (or release) request, timed spawn->exit
- agent_restore: one restore request by pod-b of the runs of `resumable_run_params`
- tree_matches_dir: a pushed branch's content equals a dir (chunked files
  reassembled), read back with `git archive`
"""
import contextlib
import io
import json
import os
import random
import shutil
import statistics
import subprocess
import tarfile
import tempfile
import time

from inflight_testing import agent_protocol
from inflight_testing.git_servers import GitDaemon, git
from inflight_testing.proxies import RelayProxy
from serve_process import bin_dir

CHUNK_SUFFIX = ".inflight-chunks"
EXCLUDES = [".env", "*.pem", "*.key", "id_rsa*"]


# --------------------------------------------------------------------------
# run dirs


def _vocabulary(rng, n=3000):
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(2, 11))) for _ in range(n)]


def _text(rng, words, size):
    """About `size` bytes of lines of random words (compresses like prose, ~2.5x)."""
    out, n = [], 0
    while n < size:
        line = " ".join(rng.choice(words) for _ in range(rng.randint(6, 14))) + "\n"
        out.append(line)
        n += len(line)
    return "".join(out)[:size]


def progress_line(rng, i):
    """One record of a progress file, ~100 bytes."""
    return json.dumps({"test": i, "name": f"case-{i:06d}", "status": rng.choice(
        ["pass", "pass", "pass", "fail"]), "score": round(rng.random(), 6),
        "ms": rng.randint(1, 5000), "seed": rng.randint(0, 2**31)}) + "\n"


def run_params(run_id, progress_file="index.jsonl"):
    return json.dumps({
        "run_id": run_id, "origin_pod": "pod-a", "created": "2024-01-01T00:00:00Z",
        "child": {"argv": ["/usr/bin/eval", "--output", "{run_dir}", "--tests", "1000"],
                  "progress_file": progress_file, "env": {"SEED": "42"}},
        "attempts": [{"attempt": 1, "pod": "pod-a", "started": "2024-01-01T00:00:01Z"}],
    }, indent=2) + "\n"


DEMO_CHILD = {"argv": ["/usr/bin/eval", "--output", "{output_dir}"], "progress_file": "index.jsonl"}


def resumable_run_params(run_id):
    """run-params.json of an interrupted run of DEMO_CHILD (template `default`)
    as serve writes it, which a restore with that template resumes."""
    return json.dumps({
        "version": 1, "run_id": run_id, "request": {}, "child_name": "default",
        "child_digest": "fnv1a64:0000000000000000", "child": DEMO_CHILD,
        "argv": ["/usr/bin/eval", "--output", "/runs/" + run_id], "cwd": "/",
        "origin_pod": "pod-a", "created_at": "2026-01-01T00:00:00Z",
        "attempts": [{"attempt": 1, "pod": "pod-a", "started_at": "2026-01-01T00:00:01Z",
                      "ended_at": "2026-01-01T00:00:02Z", "exit_code": None, "signal": 15,
                      "outcome": "interrupted"}],
    }, indent=2) + "\n"


def make_run_dir(path, seed=42, files=1000, file_bytes=6000, index_bytes=300_000):
    """The 6.3 MB / 1,005-file run dir: `files` text files of `file_bytes` in
    cases/, a progress file index.jsonl of `index_bytes`, run-params.json,
    console.log, summary.json and metrics.csv. Same seed, same bytes."""
    rng = random.Random(seed)
    words = _vocabulary(rng)
    os.makedirs(os.path.join(path, "cases"))
    for i in range(files):
        with open(os.path.join(path, "cases", f"case-{i:04d}.txt"), "w") as f:
            f.write(_text(rng, words, file_bytes))
    lines, n, i = [], 0, 0
    while n < index_bytes:
        lines.append(progress_line(rng, i))
        n += len(lines[-1])
        i += 1
    with open(os.path.join(path, "index.jsonl"), "w") as f:
        f.write("".join(lines))
    with open(os.path.join(path, "run-params.json"), "w") as f:
        f.write(run_params("r1"))
    with open(os.path.join(path, "console.log"), "w") as f:
        f.write(f"{files} tests, 0 already done\n" + _text(rng, words, 2000))
    with open(os.path.join(path, "summary.json"), "w") as f:
        f.write(json.dumps({"tests": files, "passed": files - 7, "failed": 7,
                            "words": [rng.choice(words) for _ in range(60)]}, indent=2))
    with open(os.path.join(path, "metrics.csv"), "w") as f:
        f.write("step,loss,acc\n" + "".join(
            f"{s},{rng.random():.6f},{rng.random():.6f}\n" for s in range(300)))
    return dir_stats(path)


def dir_stats(path):
    """(regular files, total bytes) under path."""
    count = size = 0
    for root, _, names in os.walk(path):
        for name in names:
            count += 1
            size += os.lstat(os.path.join(root, name)).st_size
    return count, size


# --------------------------------------------------------------------------
# workspace and repetitions


@contextlib.contextmanager
def workspace(prefix, proxy_delay=None):
    """A temp dir with a `git daemon` serving the bare repos under <tmp>/srv
    and, when `proxy_delay` is given, a RelayProxy in front of it that adds
    that many seconds to each chunk; yields (tmp, daemon, proxy or None) and
    removes all of it at the end."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    daemon = proxy = None
    try:
        daemon = GitDaemon(os.path.join(tmp, "srv"))
        if proxy_delay is not None:
            proxy = RelayProxy(daemon.port, delay=proxy_delay)
        yield tmp, daemon, proxy
    finally:
        if proxy:
            proxy.close()
        if daemon:
            daemon.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def alternate(reps, *measures):
    """Calls each measure(rep) once per repetition, in reverse order every
    other repetition, so that none always runs first (on a cold or warm cache);
    returns a list of results per measure."""
    results = [[] for _ in measures]
    for rep in range(reps):
        order = list(enumerate(measures))
        if rep % 2:
            order.reverse()
        for i, measure in order:
            results[i].append(measure(rep))
    return results


# --------------------------------------------------------------------------
# inflight-checkpoint-agent


def report(name, ours_label, ours, theirs_label, theirs, goal):
    """Prints both medians with every repetition, then the RATIO line of
    `name` (inflight/git) against `goal`."""
    ours_s, theirs_s = statistics.median(ours), statistics.median(theirs)
    for label, median, runs in ((ours_label, ours_s, ours), (theirs_label, theirs_s, theirs)):
        print(f"{label}: median {median * 1000:.0f} ms "
              f"({', '.join(f'{s * 1000:.0f}' for s in runs)})")
    ratio = ours_s / theirs_s
    print(f"RATIO {name} inflight/git = {ratio:.2f} (goal <= {goal}) "
          f"{'MET' if ratio <= goal else 'NOT MET'}")


def agent_save(run_dir, cache_dir, url, run_id="r1", attempt=1, reason="shutdown", timeout=120,
               op="save", layout=2):
    """One save request (or another op on one run: `release`) to a fresh
    `inflight-checkpoint-agent`, whose store starts a new repo in `layout`. Returns (seconds
    from spawn to exit, parsed result)."""
    run = {"run_dir": os.path.abspath(run_dir), "origin_pod": "pod-a", "run_id": run_id,
           "attempt": attempt, "reason": reason, "records": 0, "total": None}
    request = {
        "version": agent_protocol.VERSION, "op": op, "pod": "pod-a",
        "call": {"runs": [run]} if op == "release" else {"run": run},
        "store": store_settings(cache_dir, url, layout),
    }
    return agent_call(request, timeout)


def agent_restore(runs_dir, cache_dir, url, timeout=300):
    """A restore by pod-b, with DEMO_CHILD as its template `default`, into
    `runs_dir` from a fresh agent. Returns (seconds from spawn to exit, parsed result)."""
    call = {"runs_dir": os.path.abspath(runs_dir), "local": [], "skip": [],
            "children": {"default": DEMO_CHILD}, "only": None, "lease_until": None,
            "leave_handovers": False, "finished": [], "expired": {}, "take_over": True}
    return agent_call({"version": agent_protocol.VERSION, "op": "restore", "pod": "pod-b",
                       "call": call, "store": store_settings(cache_dir, url)}, timeout)


def store_settings(cache_dir, url, layout=2):
    return {"cache_dir": os.path.abspath(cache_dir), "url": url, "username": "", "token": "",
            "ssh_key": "", "known_hosts": "", "ca_file": "", "excludes": EXCLUDES,
            "restore_max_bytes": 1 << 30, "restore_max_files": 100000,
            "claim_lease_seconds": 120, "publish": True, "sweep_temp_after_seconds": 3600,
            "results_ref_retention_seconds": 600, "results_layout": layout}


def agent_call(request, timeout):
    """One request to a fresh `inflight-checkpoint-agent`: (seconds from spawn to exit, result)."""
    data = json.dumps(request).encode()
    t0 = time.monotonic()
    proc = subprocess.Popen([os.path.join(bin_dir(), "inflight-checkpoint-agent")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    out, err = proc.communicate(data, timeout=timeout)
    elapsed = time.monotonic() - t0
    try:
        result = json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError(f"checkpoint-agent exit {proc.returncode}, stdout {out!r}, "
                           f"stderr {err.decode(errors='replace')}")
    if proc.returncode != 0 or not result.get("ok"):
        raise RuntimeError(f"checkpoint-agent exit {proc.returncode}: {result} "
                           f"{err.decode(errors='replace')}")
    return elapsed, result


# --------------------------------------------------------------------------
# content check


def tree_files(bare, ref):
    """{path: bytes} of `ref` in `bare`, chunked files (<name>.inflight-chunks/NNNNNN/NNNNNN,
    or NNNNNN in the flat layout of earlier releases) reassembled into <name>."""
    tar = tarfile.open(fileobj=io.BytesIO(git(bare, "archive", "--format=tar", ref, binary=True)))
    files, chunks = {}, {}
    for member in tar.getmembers():
        if not member.isfile():
            continue
        data = tar.extractfile(member).read()
        head, suffix, leaf = member.name.partition(CHUNK_SUFFIX + "/")
        if suffix:
            chunks.setdefault(head, []).append((leaf, data))
        else:
            files[member.name] = data
    for name, parts in chunks.items():
        files[name] = b"".join(d for _, d in sorted(parts))
    return files


def tree_matches_dir(bare, ref, path):
    """(ok, detail): the tree of `ref` holds exactly the files of `path`, byte for byte."""
    pushed = tree_files(bare, ref)
    local = {}
    for root, _, names in os.walk(path):
        if os.path.basename(root) == ".git" or "/.git/" in root + "/":
            continue
        for name in names:
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                local[os.path.relpath(full, path)] = f.read()
    if pushed == local:
        return True, f"{len(pushed)} files, {sum(map(len, pushed.values()))} bytes identical"
    missing = sorted(set(local) - set(pushed))[:3]
    extra = sorted(set(pushed) - set(local))[:3]
    differ = sorted(k for k in set(local) & set(pushed) if local[k] != pushed[k])[:3]
    return False, f"missing {missing}, extra {extra}, differ {differ}"
