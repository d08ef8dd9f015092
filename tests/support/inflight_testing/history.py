"""A results repo that already holds a long history of finished runs, for
the chaos trials that check every promise still holds on a repo that big: a
ref per run under refs/inflight-results/, and an entry per run, in layout 1's
`inflight-index` runs/ (docs/results.md) or in layout 2's log
(docs/design/history-layout.md §3.1: a root, then deltas of at most 4,096
lines). Written by `git fast-import` and `git update-ref --stdin` in seconds,
where publishing each run would take hours."""

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
    """N finished runs `history-000000`... in the bare repo `bare`: their
    result refs, packed, all naming one result commit (what the history
    costs is its refs and entries, not its results' bytes), and their
    entries: with layout 1 in one new commit of inflight-index (on top of
    any it has), with layout 2 in a new log, each line naming the result."""
    if n == 0:
        return
    ids = [f"{RUN_PREFIX}{i:06d}" for i in range(n)]
    committer = b"committer inflight <inflight@localhost> 1795650000 +0000\n"
    params = json.dumps({"version": 1, "run_id": "history", "final_status": "succeeded"})
    git(bare, "fast-import", "--quiet", binary=True, input=b"".join([
        b"commit refs/inflight-history-result\n", committer,
        _data("inflight result (a history's shared result)\n"),
        b"M 100644 inline run-params.json\n", _data(params + "\n"), b"\n"]))
    result = git(bare, "rev-parse", "refs/inflight-history-result").strip()
    entries = _log(ids, result, committer) if layout == 2 else _index(bare, ids, committer)
    git(bare, "fast-import", "--quiet", input=entries, binary=True)
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
