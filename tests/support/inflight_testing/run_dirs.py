"""What inflight writes in a run dir, read back by tests: the progress file
the demo child and the test children append to, and run-params.json."""

import json
from pathlib import Path


def index_ids(run_dir):
    """The test_id of every record of index.jsonl, in file order."""
    lines = (Path(run_dir) / "index.jsonl").read_text().splitlines()
    return [json.loads(line)["test_id"] for line in lines]


def run_params(run_dir):
    return json.loads((Path(run_dir) / "run-params.json").read_text())
