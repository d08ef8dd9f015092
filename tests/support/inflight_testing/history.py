"""A results repo that already holds a long history of finished runs, for
the chaos trials and the benchmark that check every promise still holds on a
repo that big. Layout 1 (docs/results.md): a ref per run under
refs/inflight-results/, and an entry per run in `inflight-index` runs/.
Layout 2 as its pods leave it once every run was folded and its result ref
deleted (docs/design/history-layout.md §3.1): an entry per run in the log (a
root, then deltas of at most 4,096 lines), and the archive, whose folds hold
each run's markers and reach the result, with no result ref. Written by `git
fast-import` and `git update-ref --stdin` in seconds, where publishing each
run would take hours."""

import hashlib
import json

from inflight_testing.git_servers import git

RUN_PREFIX = "history-"
LOG_LINES = 4096  # a delta's lines at most, what a reader takes from one file


def _data(text):
    raw = text.encode()
    return f"data {len(raw)}\n".encode() + raw + b"\n"


def _entry(run_id):
    return {"id": run_id, "final_status": "succeeded", "pod": "pod-old",
            "attempts": [{"pod": "pod-old", "outcome": "succeeded",
                          "started": "2026-11-01T00:00:01Z", "ended": "2026-11-01T00:05:00Z"}],
            "records": 1, "total": None, "created_at": "2026-11-01T00:00:00Z",
            "finished_at": "2026-11-01T00:05:00Z", "result": f"refs/inflight-results/{run_id}"}


def write_history(bare, n, layout=1):
    """N finished runs `history-000000`... in the bare repo `bare`, all of
    one result commit (what the history costs is its refs and entries, not
    its results' bytes). Layout 1: their result refs, packed, and their
    entries in one new commit of inflight-index (on top of any it has).
    Layout 2: their entries in a new log, each line naming the result, and a
    new archive of their folds."""
    if n == 0 and layout == 1:
        return  # layout 2 still gets its log's root
    ids = [f"{RUN_PREFIX}{i:06d}" for i in range(n)]
    committer = b"committer inflight <inflight@localhost> 1795650000 +0000\n"
    params = json.dumps({"version": 1, "run_id": "history", "final_status": "succeeded"})
    git(bare, "fast-import", "--quiet", binary=True, input=b"".join([
        b"commit refs/inflight-history-result\n", committer,
        _data("inflight result (a history's shared result)\n"),
        b"M 100644 inline run-params.json\n", _data(params + "\n"), b"\n"]))
    result = git(bare, "rev-parse", "refs/inflight-history-result").strip()
    if layout == 2:
        git(bare, "fast-import", "--quiet", input=_log(ids, result, committer) +
            _archive(ids, result), binary=True)
        updates = f"delete {MARKERS} {git(bare, 'rev-parse', MARKERS).strip()}\n"
    else:
        git(bare, "fast-import", "--quiet", input=_index(bare, ids, committer), binary=True)
        updates = "".join(f"create refs/inflight-results/{run_id} {result}\n" for run_id in ids)
    updates += f"delete refs/inflight-history-result {result}\n"
    git(bare, "update-ref", "--stdin", input=updates)
    git(bare, "pack-refs", "--all")


def _index(bare, ids, committer):
    parts = [b"commit refs/heads/inflight-index\n", committer,
             _data(f"inflight index: {len(ids)} runs of history\n")]
    if git(bare, "for-each-ref", "refs/heads/inflight-index"):
        parts.append(b"from refs/heads/inflight-index^0\n")
    parts += [f"M 100644 inline runs/{run_id}.json\n".encode() + _data(json.dumps(_entry(run_id), indent=2) + "\n")
              for run_id in ids]
    return b"".join(parts) + b"\n"


def _log(ids, result, committer):
    ref = b"commit refs/heads/inflight-runs-log\n"
    parts = [ref, committer, _data("inflight runs log\n"),
             b"M 100644 inline layout\n", _data("inflight-runs 2\n"), b"\n"]
    for first in range(0, len(ids), LOG_LINES):
        delta = ids[first:first + LOG_LINES]
        lines = "".join(json.dumps({**_entry(run_id), "result_commit": result},
                                   separators=(",", ":")) + "\n" for run_id in delta)
        parts += [ref, committer, _data(f"inflight runs: {len(delta)} lines\n"),
                  b"M 100644 inline entries.jsonl\n", _data(lines), b"\n"]
    return b"".join(parts)


MARKERS = "refs/inflight-history-markers"  # where fast-import makes the genesis, deleted after
# The genesis's bytes, which make its id (libcheckpoint/src/git/markers.cpp): at time 0 on the
# empty tree, by inflight.
SIGNATURE = b"inflight <inflight@localhost> 0 +0000\n"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
RUNS_PER_FOLD = 1000


def _genesis_id():
    body = (f"tree {EMPTY_TREE}\n".encode() + b"author " + SIGNATURE + b"committer " + SIGNATURE +
            b"\ninflight archive\n")
    return hashlib.sha1(b"commit %d\0" % len(body) + body).hexdigest()


def _archive(ids, result):
    """refs/inflight-archive/results: folds of RUNS_PER_FOLD runs on the genesis G, each with the
    result as a parent, and in its tree the marker K (`.archive`) and, under each run's id, the
    status marker S(id, succeeded), which holds M(id): each a gitlink at G."""
    genesis = _genesis_id()
    parts = [f"reset {MARKERS}\ncommit {MARKERS}\nmark :1\n".encode(), b"author " + SIGNATURE,
             b"committer " + SIGNATURE, _data("inflight archive\n"), b"\n"]
    tip = ":1"
    for fold, first in enumerate(range(0, len(ids), RUNS_PER_FOLD), start=2):
        runs = ids[first:first + RUNS_PER_FOLD]
        parts.extend([f"commit refs/inflight-archive/results\nmark :{fold}\n".encode(),
                      b"author " + SIGNATURE, b"committer " + SIGNATURE,
                      _data(f"inflight archive: {len(runs)} runs\n"), f"from {tip}\n".encode()])
        parts.append(f"merge {result}\ndeleteall\n"
                     f"M 160000 {genesis} .archive/inflight archive\n".encode())
        parts.extend(f"M 160000 {genesis} {run_id}/succeeded/inflight published {run_id}\n".encode()
                     for run_id in runs)
        parts.append(b"\n")
        tip = f":{fold}"
    return b"".join(parts)
