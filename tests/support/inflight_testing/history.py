"""A results repo that already holds a long history of finished runs, as
today's layout keeps them (docs/results.md): an entry per run in
`inflight-index`'s runs/ and a ref per run under refs/inflight-results/, for
the chaos trials that check every promise still holds on a repo that big.
Written by `git fast-import` and `git update-ref --stdin` in seconds, where
publishing each run would take hours."""

import json

from inflight_testing.git_servers import git

RUN_PREFIX = "history-"


def _data(text):
    raw = text.encode()
    return f"data {len(raw)}\n".encode() + raw + b"\n"


def _entry(run_id):
    return json.dumps({"id": run_id, "final_status": "succeeded", "pod": "pod-old",
                       "attempts": [{"pod": "pod-old", "outcome": "succeeded",
                                     "started": "2026-11-01T00:00:01Z",
                                     "ended": "2026-11-01T00:05:00Z"}],
                       "records": 1, "total": None, "created_at": "2026-11-01T00:00:00Z",
                       "finished_at": "2026-11-01T00:05:00Z",
                       "result": f"refs/inflight-results/{run_id}"}, indent=2) + "\n"


def write_history(bare, n):
    """N finished runs `history-000000`... in the bare repo `bare`: their
    entries in one new commit of inflight-index (on top of any it has), and
    their result refs, packed, all naming one result commit (what the
    history costs is its refs and entries, not its results' bytes)."""
    if n == 0:
        return
    ids = [f"{RUN_PREFIX}{i:06d}" for i in range(n)]
    committer = b"committer inflight <inflight@localhost> 1795650000 +0000\n"
    params = json.dumps({"version": 1, "run_id": "history", "final_status": "succeeded"})
    parts = [b"commit refs/inflight-history-result\nmark :1\n", committer,
             _data("inflight result (a history's shared result)\n"),
             b"M 100644 inline run-params.json\n", _data(params + "\n"), b"\n",
             b"commit refs/heads/inflight-index\n", committer,
             _data(f"inflight index: {n} runs of history\n")]
    if git(bare, "for-each-ref", "refs/heads/inflight-index"):
        parts.append(b"from refs/heads/inflight-index^0\n")
    parts += [f"M 100644 inline runs/{run_id}.json\n".encode() + _data(_entry(run_id))
              for run_id in ids]
    parts.append(b"\n")
    git(bare, "fast-import", "--quiet", input=b"".join(parts), binary=True)
    result = git(bare, "rev-parse", "refs/inflight-history-result").strip()
    updates = "".join(f"create refs/inflight-results/{run_id} {result}\n" for run_id in ids)
    updates += f"delete refs/inflight-history-result {result}\n"
    git(bare, "update-ref", "--stdin", input=updates)
    git(bare, "pack-refs", "--all")
