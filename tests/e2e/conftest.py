"""Fixtures that drive the real `inflight` binary: processes, HTTP, signals."""

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

BIN_DIR = Path(os.environ.get("INFLIGHT_BIN_DIR", Path(__file__).resolve().parents[2] / "build" / "bin"))
INFLIGHT = BIN_DIR / "inflight"
DEMO = BIN_DIR / "inflight-demo-eval"
CHILDREN = Path(__file__).resolve().parent / "children"
PYTHON = "/usr/bin/python3"


@contextlib.contextmanager
def small_tmpfs(path, size="2m"):
    """A tmpfs of `size` mounted at `path` for the block; skips the test when
    it cannot be mounted (mounting needs root)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    path.mkdir(exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)])


def wait_for(condition, timeout, what):
    """Polls `condition` until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


class Response:
    def __init__(self, status, body, headers):
        self.status = status
        self.body = body
        self.headers = headers

    def json(self):
        return json.loads(self.body)


def http(method, url, body=None, headers=None, timeout=10):
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return Response(r.status, r.read().decode(), dict(r.headers))
    except urllib.error.HTTPError as e:
        return Response(e.code, e.read().decode(), dict(e.headers))


class Serve:
    """One `inflight serve` process with its stderr collected line by line."""

    def __init__(self, workdir, args=(), env=None, binary=INFLIGHT):
        self.workdir = Path(workdir)
        self.lines = []
        self.changed = threading.Condition()
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("INFLIGHT_")}
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            [str(binary), "serve", "--listen", "127.0.0.1:0", "--log-format", "json", *args],
            cwd=self.workdir, env=full_env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        listening = self.wait_log(lambda e: e.get("msg") == "listening", 15)
        self.url = "http://" + listening["address"]

    def _read(self):
        for line in self.proc.stderr:
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def events(self):
        out = []
        for line in list(self.lines):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                out.append({"msg": line.rstrip()})
        return out

    def wait_log(self, predicate, timeout):
        """Waits on the stderr reader until a log event matches."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for event in self.events():
                    if predicate(event):
                        return event
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.reader.is_alive()):
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
        wait_for(lambda: self.get("/readyz").status == 200, timeout, "readyz")

    def signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def wait_exit(self, timeout=30):
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=5)
        return code

    def stop(self):
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keeps each phase's report on the test item, for fixtures' teardown."""
    report = (yield).get_result()
    setattr(item, "report_" + report.when, report)


def print_logs(serves, tail=40):
    """What each serve said that matters, for a failed test's report (CI
    keeps nothing else)."""
    for s in serves:
        print(f"--- serve in {s.workdir} (exit {s.proc.returncode}): warnings, errors, last {tail}")
        lines = list(s.lines)
        for line in lines[:-tail]:
            if '"level":"warn"' in line or '"level":"error"' in line:
                print(line, end="")
        print("".join(lines[-tail:]), end="")


@pytest.fixture
def serve_factory(request, tmp_path):
    started = []

    def start(*args, workdir=None, env=None, binary=INFLIGHT):
        s = Serve(workdir or tmp_path, args, env, binary)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()
    call = getattr(request.node, "report_call", None)
    if call is not None and call.failed:
        print_logs(started)


def write_config(path, child, **options):
    config = dict(options)
    config["child"] = child
    Path(path).write_text(json.dumps(config))
    return str(path)


def script_child(script, params=None, resume_argv=("--resume",), progress_file="index.jsonl"):
    """A child template that runs one of the test children in tests/e2e/children."""
    return {
        "argv": [PYTHON, str(CHILDREN / script), "--output", "{output_dir}"],
        "resume_argv": list(resume_argv),
        "params": params or {},
        "progress_file": progress_file,
    }


def index_ids(run_dir):
    lines = (Path(run_dir) / "index.jsonl").read_text().splitlines()
    return [json.loads(line)["test_id"] for line in lines]


def run_params(run_dir):
    return json.loads((Path(run_dir) / "run-params.json").read_text())


def process_exists(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def zombies_of(pid):
    """Zombie processes whose parent is `pid`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if fields[0] == "Z" and int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def metric(serve, name):
    for line in serve.get("/metrics").body.splitlines():
        if line.split(" ")[0] == name:
            return float(line.split(" ")[1])
    return None
