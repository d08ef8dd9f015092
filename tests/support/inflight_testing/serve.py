"""One `inflight serve` process, as the e2e tests, the chaos test and the
benchmarks start it: listening on a free port, logging JSON to stderr, which a
thread parses line by line so that waits on the log are woken by it (a
benchmark timing a wait must not pay a poll interval)."""

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from .http import http
from .waiting import wait_for


def parse_log_line(line):
    """A JSON log entry; any other line as {"msg": line}."""
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return {"msg": line.rstrip()}


class Serve:
    """`binary serve --listen 127.0.0.1:0 --log-format json args...` in
    `workdir`, with no INFLIGHT_* variable of ours in its environment but `env`.
    `binary` is always given: the tests' and the benchmarks' builds differ.

    lines   its stderr lines so far; events() the same parsed
    url     http://127.0.0.1:PORT once it logged "listening"; port the PORT
    """

    def __init__(self, workdir, args=(), env=None, *, binary):
        self.workdir = Path(workdir)
        self.lines = []
        self._events = []
        self.changed = threading.Condition()
        self._ended = False  # the reader saw stderr's end
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("INFLIGHT_")}
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            [str(binary), "serve", "--listen", "127.0.0.1:0", "--log-format", "json", *args],
            cwd=self.workdir, env=full_env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        listening = self.wait_log(lambda e: e.get("msg") == "listening", 15)
        self.url = "http://" + listening["address"]
        self.port = int(listening["address"].rsplit(":", 1)[1])

    def _read(self):
        """What serve wrote, as it comes: each read's whole lines are kept under one lock with
        one wake-up, so that a serve logging thousands of lines a second (two per model call)
        costs the reader little of the CPU it shares with what is measured."""
        fd = self.proc.stderr.fileno()
        partial = b""
        while True:
            chunk = os.read(fd, 1 << 16)
            data = partial + chunk
            end = data.rfind(b"\n") + 1 if chunk else len(data)
            partial = data[end:]
            text = data[:end].decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n")
            lines = text.split("\n")
            last = lines.pop()  # empty but at the end, where the last line may lack its newline
            lines = [line + "\n" for line in lines] + ([last] if last else [])
            if chunk and not lines:
                continue
            events = [self._parsed(line) for line in lines]
            with self.changed:
                self.lines.extend(lines)
                self._events.extend(events)
                self._ended = not chunk
                self.changed.notify_all()
            if not chunk:
                return

    def _parsed(self, line):
        """One log line as the event kept; a subclass may add to it."""
        return parse_log_line(line)

    def events(self):
        with self.changed:
            return list(self._events)

    def logged(self, msg):
        """The first log entry with this message so far, or None."""
        return next((e for e in self.events() if e.get("msg") == msg), None)

    def wait_log(self, predicate, timeout):
        """Waits on the stderr reader until a log event matches; returns it.
        Each event is looked at once, as it arrives."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self.changed:
            while True:
                for event in self._events[seen:]:
                    if predicate(event):
                        return event
                seen = len(self._events)
                left = deadline - time.monotonic()
                if left <= 0 or self._ended:
                    raise AssertionError("no matching log line; stderr was:\n" + "".join(self.lines))
                self.changed.wait(left)

    def get(self, path, **kw):
        return http("GET", self.url + path, **kw)

    def post(self, path, body=None, **kw):
        return http("POST", self.url + path, body, **kw)

    def submit(self, **params):
        r = self.post("/api/eval/run", params)
        assert r.status == 202, r.body
        return r.json()["id"]

    def status(self, run_id):
        r = self.get(f"/api/eval/status/{run_id}")
        assert r.status == 200, r.body
        return r.json()

    def wait_status(self, run_id, statuses, timeout=30):
        statuses = {statuses} if isinstance(statuses, str) else set(statuses)
        return wait_for(lambda: (s := self.status(run_id))["status"] in statuses and s, timeout,
                        f"run {run_id} to become {statuses}")

    def wait_ready(self, timeout=30):
        """Until /readyz answers 200. A probe that gets no answer within its own 5 s is one
        "not yet", as a kubelet's failed probe is: on a loaded machine (the sanitized suite, two
        tests on 2 cores) a start once took longer than one probe's wait, never than `timeout`."""
        def ready():
            try:
                return self.get("/readyz", timeout=5).status == 200
            except OSError:
                if self.proc.poll() is not None:
                    raise AssertionError(f"serve exited {self.proc.returncode} before it was ready; "
                                         "stderr was:\n" + "".join(self.lines)) from None
                return False

        wait_for(ready, timeout, "readyz")

    def signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def wait_exit(self, timeout=30):
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=5)
        return code

    def stop(self, timeout=30):
        """SIGTERM, SIGKILL if it has not exited after `timeout`; returns the
        exit code. The wait blocks in waitpid, so it returns as serve exits
        (Popen.wait with a timeout polls with sleeps of up to 50 ms, which a
        benchmark timing the shutdown would count)."""
        if self.proc.poll() is None:
            killer = threading.Timer(timeout, self.proc.kill)
            killer.start()
            try:
                self.signal(signal.SIGTERM)
                self.proc.wait()
            finally:
                killer.cancel()
        return self.proc.returncode
