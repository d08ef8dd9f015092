"""`inflight serve` driven from a benchmark: start, talk HTTP, stop.

Shared by idle_rss.py, cpu_ticks.py and shutdown_latency.py (stdlib only).
"""
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bin_dir():
    build = os.environ.get("INFLIGHT_BUILD_DIR", os.path.join(REPO, "build-bench"))
    return os.path.join(build, "bin")


def wait_for(predicate, timeout, what, interval=0.05):
    """Polls `predicate` until it is truthy or the deadline passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def http(port, method, path, body=None):
    """(status, parsed JSON body); (None, None) when the connection fails."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, None
    except OSError:
        return None, None


def log_entry(line):
    """The JSON entry of one line of serve's log; None for any other line."""
    try:
        return json.loads(line)
    except ValueError:
        return None


class Serve:
    """`inflight serve` in a temp cwd; stderr JSON lines are read by a thread."""

    def __init__(self, extra_args=()):
        self.tmp = tempfile.mkdtemp(prefix="inflight-bench-")
        self.runs_dir = os.path.join(self.tmp, "runs")
        self.lines = queue.Queue()
        self.log = []
        self.proc = subprocess.Popen(
            [os.path.join(bin_dir(), "inflight"), "serve", "--listen", "127.0.0.1:0",
             "--runs-dir", self.runs_dir, "--log-format", "json", *extra_args],
            cwd=self.tmp, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()
        self.port = self._wait_listening(timeout=10)

    def _read(self):
        for line in self.proc.stderr:
            self.log.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def _wait_listening(self, timeout):
        entry = self.wait_logged("listening", timeout)
        return int(entry["address"].rsplit(":", 1)[1])

    def start_long_runs(self, n, prefix, test_ms=1000):
        """Submits n demo runs that would last a day; returns once every child
        is running and has written its start line."""
        wait_for(lambda: http(self.port, "GET", "/readyz")[0] == 200, 10, "/readyz 200")
        ids = []
        for i in range(n):
            code, body = http(self.port, "POST", "/api/eval/run",
                              {"id": f"{prefix}-{i:02d}", "tests": 99999, "test_ms": test_ms})
            if code != 202:
                raise RuntimeError(f"submit {i}: HTTP {code} {body}")
            ids.append(body["id"])

        def all_running():
            code, body = http(self.port, "GET", "/api/eval/runs")
            return code == 200 and sum(r["status"] == "running" for r in body["runs"]) == n
        wait_for(all_running, 30, f"all {n} runs running", interval=0.1)
        wait_for(lambda: all(started(self.runs_dir, i) for i in ids), 30,
                 "every child's start line in console.log", interval=0.05)
        return ids

    def logged(self, msg):
        """The first log entry with this message, if serve wrote one."""
        for line in list(self.log):
            entry = log_entry(line)
            if entry and entry.get("msg") == msg:
                return entry
        return None

    def wait_logged(self, msg, timeout):
        """Blocks until serve logs an entry with this message; returns it.

        Read off the log as it arrives: a poll would add up to its interval
        to a timed wait."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"timed out after {timeout}s waiting for '{msg}'")
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError(f"serve exited before '{msg}': " + "".join(self.log[-20:]))
            entry = log_entry(line)
            if entry and entry.get("msg") == msg:
                return entry

    def stop(self, timeout=30):
        """SIGTERM, then the exit code (SIGKILL if it does not exit in time).

        The wait blocks in waitpid, so it returns as serve exits: Popen.wait
        with a timeout polls with sleeps of up to 50 ms, which a benchmark
        timing the shutdown would count."""
        if self.proc.poll() is None:
            killer = threading.Timer(timeout, self.proc.kill)
            killer.start()
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait()
            finally:
                killer.cancel()
        return self.proc.returncode

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
