"""The index entries of a results repo, read with the git program whatever its layout.

A new results repo keeps its index in layout 2's log, one that earlier releases wrote in
`inflight-index`'s files (docs/results.md "The history layout"). Tests read entries through here
so that they check what a publish wrote, wherever the repo keeps it.
"""
import json

from .git_servers import git

LOG = "refs/heads/inflight-runs-log"
FLAT = "refs/heads/inflight-index"


def has_ref(bare, ref):
    return bool(git(bare, "for-each-ref", ref).strip())


def has_index(bare):
    """Whether the repo holds an index of either layout."""
    return has_ref(bare, LOG) or has_ref(bare, FLAT)


def index_entries(bare):
    """Every run's entry by its id: layout 1's files, then the log read oldest delta first, the
    last line of an id winning and a removal line removing it."""
    entries = {}
    if has_ref(bare, FLAT):
        for path in git(bare, "ls-tree", "-r", "--name-only", FLAT, "--", "runs/").split():
            run_id = path.removeprefix("runs/").removesuffix(".json")
            entries[run_id] = json.loads(git(bare, "show", f"{FLAT}:{path}"))
    if has_ref(bare, LOG):
        for commit in git(bare, "rev-list", "--reverse", LOG).split()[1:]:  # after the root
            for line in git(bare, "show", f"{commit}:entries.jsonl").splitlines():
                entry = json.loads(line)
                if entry.get("removed"):
                    entries.pop(entry["id"], None)
                else:
                    entries[entry["id"]] = entry
    return entries


def index_entry(bare, run_id):
    """One run's entry; a KeyError names the run when the index has none."""
    return index_entries(bare)[run_id]
