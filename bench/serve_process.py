"""`inflight serve` as the benchmarks run it: from the build being measured
(INFLIGHT_BUILD_DIR, default build-bench/), in a temp dir of its own, with
long demo runs that keep its children busy. The process wrapper itself is the
test support package's Serve (tests/support/inflight_testing)."""
import os
import shutil
import tempfile

from inflight_testing.serve import Serve
from inflight_testing.waiting import wait_for

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bin_dir():
    build = os.environ.get("INFLIGHT_BUILD_DIR", os.path.join(REPO, "build-bench"))
    return os.path.join(build, "bin")


class BenchServe(Serve):
    """serve with --runs-dir in a temp dir that cleanup() removes."""

    def __init__(self, extra_args=()):
        self.tmp = tempfile.mkdtemp(prefix="inflight-bench-")
        self.runs_dir = os.path.join(self.tmp, "runs")
        super().__init__(self.tmp, ["--runs-dir", self.runs_dir, *extra_args],
                         binary=os.path.join(bin_dir(), "inflight"))

    def start_long_runs(self, n, prefix, test_ms=1000):
        """Submits n demo runs that would last a day; returns once every child
        is running and has written its start line."""
        self.wait_ready(10)
        ids = [self.submit(id=f"{prefix}-{i:02d}", tests=99999, test_ms=test_ms) for i in range(n)]

        def all_running():
            r = self.get("/api/eval/runs")
            return r.status == 200 and sum(run["status"] == "running" for run in r.json()["runs"]) == n
        wait_for(all_running, 30, f"all {n} runs running", interval=0.1)
        wait_for(lambda: all(started(self.runs_dir, i) for i in ids), 30,
                 "every child's start line in console.log", interval=0.05)
        return ids

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def started(runs_dir, run_id):
    """Whether the run's child has written its start line to console.log."""
    try:
        with open(os.path.join(runs_dir, run_id, "console.log")) as f:
            return " tests, " in f.read()
    except OSError:
        return False
