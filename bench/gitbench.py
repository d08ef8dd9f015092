"""Shared helpers of the checkpoint benchmarks (stdlib only; not a benchmark).

- make_run_dir: the deterministic 1,005-file run dir (seeded RNG)
- GitDaemon: `git daemon` on 127.0.0.1, waited for by its "Ready to rumble"
  line with a deadline; one daemon serves many fresh bare repos
- ByteProxy: a TCP proxy that counts client->server and server->client bytes
- agent_save: one `inflight-checkpoint-agent` save request, timed spawn->exit
- git / git_env: the git CLI without user or system config
- tree_matches_dir: a pushed branch's content equals a dir (chunked files
  reassembled), read back with `git archive`
"""
import io
import json
import os
import random
import selectors
import signal
import socket
import subprocess
import tarfile
import threading
import time

from serve_process import bin_dir, wait_for

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
# git CLI and git daemon


def git_env():
    """Environment for the git CLI: no prompts, no user or system config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({
        "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@inflight.invalid",
        "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@inflight.invalid",
    })
    return env


def git(repo, *args, timeout=120, binary=False, input_text=None):
    cmd = ["git"] + (["-C", str(repo)] if repo is not None else []) + [str(a) for a in args]
    stdin = {"input": input_text.encode()} if input_text is not None else {
        "stdin": subprocess.DEVNULL}
    proc = subprocess.run(cmd, env=git_env(), capture_output=True, timeout=timeout, **stdin)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                           f"{proc.stderr.decode(errors='replace')}")
    return proc.stdout if binary else proc.stdout.decode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GitDaemon:
    """`git daemon` exporting every bare repo under `base` (receive-pack on)."""

    def __init__(self, base, timeout=15):
        self.base = str(base)
        os.makedirs(self.base, exist_ok=True)
        for attempt in range(5):
            self.port = free_port()
            self.log = os.path.join(self.base, f"daemon-{attempt}.log")
            with open(self.log, "wb") as out:
                self.proc = subprocess.Popen(
                    ["git", "daemon", "--verbose", "--reuseaddr", "--export-all",
                     "--enable=receive-pack", f"--base-path={self.base}", "--listen=127.0.0.1",
                     f"--port={self.port}", self.base],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    env=git_env(), start_new_session=True)
            try:
                # --verbose prints this once the listening socket is bound.
                wait_for(lambda: self._output_has("Ready to rumble") or self.proc.poll() is not None,
                         timeout, "git daemon 'Ready to rumble'")
            except TimeoutError:
                self.stop()
                raise
            if self.proc.poll() is None:
                return
            if "already in use" not in self._output():
                raise RuntimeError(f"git daemon exited: {self._output()}")
        raise RuntimeError("git daemon lost the race for a port 5 times")

    def _output(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def _output_has(self, text):
        return text in self._output()

    def new_repo(self, name):
        """A fresh bare repo; returns (path, git:// url)."""
        path = os.path.join(self.base, name)
        git(None, "init", "-q", "--bare", "-b", "main", path)
        return path, self.url(name)

    def url(self, name, port=None):
        return f"git://127.0.0.1:{port or self.port}/{name}"

    def stop(self):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=5)
                break
            except subprocess.TimeoutExpired:
                continue


# --------------------------------------------------------------------------
# byte-counting proxy


class ByteProxy:
    """Listens on 127.0.0.1:<port> and forwards each connection to
    127.0.0.1:<target_port>, counting bytes in each direction. One selector
    thread does everything; `settled()` waits until every accepted connection
    has been closed on both sides, so counts are final."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.up = 0     # client -> server
        self.down = 0   # server -> client
        self.connections = 0
        self.open = 0
        self.cond = threading.Condition()
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listener, selectors.EVENT_READ, None)
        self.wake_r, self.wake_w = socket.socketpair()
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        self.stopping = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def counts(self):
        with self.cond:
            return self.up, self.down, self.connections

    def settled(self, timeout=10):
        """Waits until no proxied connection is open; returns counts()."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.open:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{self.open} proxied connection(s) still open")
                self.cond.wait(remaining)
            return self.up, self.down, self.connections

    def _loop(self):
        pipes = {}  # socket -> [peer, is_client_side, eof_seen]
        while not self.stopping:
            for key, _ in self.sel.select():
                if key.data == "wake":
                    self.wake_r.recv(64)
                    continue
                if key.data is None:
                    client, _ = self.listener.accept()
                    server = socket.create_connection(("127.0.0.1", self.target_port))
                    for s in (client, server):
                        s.setblocking(True)
                    pipes[client] = [server, True]
                    pipes[server] = [client, False]
                    self.sel.register(client, selectors.EVENT_READ, "conn")
                    self.sel.register(server, selectors.EVENT_READ, "conn")
                    with self.cond:
                        self.connections += 1
                        self.open += 1
                    continue
                sock = key.fileobj
                if sock not in pipes:  # closed earlier in this batch
                    continue
                peer, from_client = pipes[sock][:2]
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if data:
                    with self.cond:
                        if from_client:
                            self.up += len(data)
                        else:
                            self.down += len(data)
                    try:
                        peer.sendall(data)
                    except OSError:
                        pass
                    continue
                # EOF (or error) on this side: pass the half-close on.
                self.sel.unregister(sock)
                pipes[sock].append(True)
                try:
                    peer.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                if len(pipes[peer]) == 3:  # both sides have ended
                    for s in (sock, peer):
                        pipes.pop(s, None)
                        s.close()
                    with self.cond:
                        self.open -= 1
                        self.cond.notify_all()

    def close(self):
        self.stopping = True
        self.wake_w.send(b"x")
        self.thread.join(timeout=5)
        self.listener.close()


# --------------------------------------------------------------------------
# inflight-checkpoint-agent


def agent_save(run_dir, cache_dir, url, run_id="r1", attempt=1, reason="shutdown", timeout=120):
    """One save request to a fresh `inflight-checkpoint-agent`.
    Returns (seconds from spawn to exit, parsed result)."""
    request = {
        "version": 3, "op": "save", "pod": "pod-a",
        "call": {"run": {"run_dir": os.path.abspath(run_dir), "origin_pod": "pod-a",
                         "run_id": run_id, "attempt": attempt, "reason": reason,
                         "records": 0}},
        "store": {"cache_dir": os.path.abspath(cache_dir), "url": url, "username": "",
                  "token": "", "ssh_key": "", "known_hosts": "", "ca_file": "",
                  "excludes": EXCLUDES, "restore_max_bytes": 1 << 30,
                  "restore_max_files": 100000, "claim_lease_seconds": 120},
    }
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
    """{path: bytes} of `ref` in `bare`, chunked files (<name>.inflight-chunks/NNNNNN)
    reassembled into <name>."""
    tar = tarfile.open(fileobj=io.BytesIO(git(bare, "archive", "--format=tar", ref, binary=True)))
    files, chunks = {}, {}
    for member in tar.getmembers():
        if not member.isfile():
            continue
        data = tar.extractfile(member).read()
        head, _, leaf = member.name.rpartition("/")
        if head.endswith(CHUNK_SUFFIX):
            chunks.setdefault(head[:-len(CHUNK_SUFFIX)], []).append((leaf, data))
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
