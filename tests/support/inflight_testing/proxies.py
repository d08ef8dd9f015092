"""TCP stand-ins for the network between inflight and its results repo, all
on 127.0.0.1 with a port of their own:

- RelayProxy forwards to a port, counting bytes and connections, optionally
  adding latency to every chunk (the benchmarks' hosted git service);
- FlakyRemote forwards until it is told to go down (resets everything) or to
  hang (accepts, never answers) (the chaos test's unreliable remote);
- HungServer accepts and never sends a byte (a remote that hangs from the
  start).
"""

import heapq
import select
import selectors
import socket
import struct
import threading
import time


def reset(sock):
    """Closes with an RST, as a host that went away."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


class RelayProxy:
    """127.0.0.1:<port> -> 127.0.0.1:<target_port>. Each chunk is forwarded
    `delay` seconds after it arrived, in order (at once when 0), and so is a
    half-close. One thread: a selector for reads and a heap of timed writes.

    up, down     bytes client -> server and server -> client
    connections  accepted so far; settled() waits until none is open, so
                 that the counts are final
    """

    def __init__(self, target_port, delay=0.0):
        self.target_port = target_port
        self.delay = delay
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.up = 0
        self.down = 0
        self.connections = 0
        self.open = 0
        self.cond = threading.Condition()
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        self.wake_r, self.wake_w = socket.socketpair()
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        self.due = []  # (time, seq, socket that read it, data or None for EOF)
        self.seq = 0
        self.pipes = {}  # socket -> [peer, from_client, ended]
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
                    raise AssertionError(f"{self.open} proxied connection(s) still open")
                self.cond.wait(remaining)
            return self.up, self.down, self.connections

    def _loop(self):
        while not self.stopping:
            timeout = max(0.0, self.due[0][0] - time.monotonic()) if self.due else None
            for key, _ in self.sel.select(timeout):
                if key.data == "wake":
                    self.wake_r.recv(64)
                elif key.data == "accept":
                    self._accept()
                elif key.fileobj in self.pipes:  # not closed earlier in this batch
                    self._read(key.fileobj)
            now = time.monotonic()
            while self.due and self.due[0][0] <= now:
                _, _, sock, data = heapq.heappop(self.due)
                self._forward(sock, data)

    def _accept(self):
        client, _ = self.listener.accept()
        server = socket.create_connection(("127.0.0.1", self.target_port))
        for s in (client, server):
            s.setblocking(True)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sel.register(s, selectors.EVENT_READ, "conn")
        self.pipes[client] = [server, True, False]
        self.pipes[server] = [client, False, False]
        with self.cond:
            self.connections += 1
            self.open += 1

    def _read(self, sock):
        try:
            data = sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            self.sel.unregister(sock)
        if self.delay:
            self.seq += 1
            heapq.heappush(self.due, (time.monotonic() + self.delay, self.seq, sock, data or None))
        else:
            self._forward(sock, data or None)

    def _forward(self, sock, data):
        """Sends what `sock` read to its peer; None passes its EOF on, and
        closes both once both sides have ended."""
        peer, from_client, _ = self.pipes[sock]
        if data is not None:
            with self.cond:
                if from_client:
                    self.up += len(data)
                else:
                    self.down += len(data)
            try:
                peer.sendall(data)
            except OSError:
                pass
            return
        self.pipes[sock][2] = True
        try:
            peer.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        if self.pipes[peer][2]:
            for s in (sock, peer):
                del self.pipes[s]
                s.close()
            with self.cond:
                self.open -= 1
                self.cond.notify_all()

    def close(self):
        self.stopping = True
        self.wake_w.send(b"x")
        self.thread.join(timeout=5)
        self.listener.close()


class AcceptLoop:
    """A listener on 127.0.0.1 whose thread hands each accepted connection to
    accepted(); stop() ends the thread, closes the listener, then closed().
    As a context manager it stops at the end of the block."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)  # lets the accept loop notice stop()
        self.port = self.listener.getsockname()[1]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except (socket.timeout, OSError):
                continue
            self.accepted(conn)

    def stop(self):
        self.stopping.set()
        self.thread.join(timeout=5)
        self.listener.close()
        self.closed()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class FlakyRemote(AcceptLoop):
    """A TCP proxy in front of a git daemon. `up` forwards (each chunk
    after `latency` seconds); `down` resets every connection, open or new;
    `hung` accepts and never answers, and freezes the connections already
    open."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.mode = "up"
        self.latency = 0.0
        self.lock = threading.Lock()
        self.sockets = set()
        super().__init__()

    def url(self, repo_name):
        return f"git://127.0.0.1:{self.port}/{repo_name}"

    def set_mode(self, mode):
        with self.lock:
            if mode != self.mode and mode != "hung":
                self._reset_all()  # a remote coming back or going down drops what was open
            self.mode = mode

    def closed(self):
        with self.lock:
            self._reset_all()

    def _reset_all(self):
        for sock in list(self.sockets):
            reset(sock)
        self.sockets.clear()

    def accepted(self, conn):
        with self.lock:
            mode = self.mode
            if mode == "down":
                return reset(conn)
            self.sockets.add(conn)
        if mode == "up":
            self._forward(conn)

    def _forward(self, conn):
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
        except OSError:
            return reset(conn)
        with self.lock:
            self.sockets.add(upstream)
        for src, dst in ((conn, upstream), (upstream, conn)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src, dst):
        try:
            while not self.stopping.is_set():
                if self.mode == "hung":
                    time.sleep(0.05)
                    continue
                if not select.select([src], [], [], 0.1)[0]:
                    continue
                data = src.recv(65536)
                time.sleep(self.latency)
                if not data:
                    return dst.shutdown(socket.SHUT_WR)
                dst.sendall(data)
        except (OSError, ValueError):  # reset or closed by set_mode/stop
            return


class HungServer(AcceptLoop):
    """Accepts TCP connections and never sends a byte, holding each open so
    that clients see a live, silent peer.

    git_url / http_url / https_url point at it; `connections` counts accepted
    sockets.
    """

    def __init__(self, repo_name="results.git"):
        self.held = []
        super().__init__()
        self.git_url = f"git://127.0.0.1:{self.port}/{repo_name}"
        self.http_url = f"http://127.0.0.1:{self.port}/git/{repo_name}"
        self.https_url = f"https://127.0.0.1:{self.port}/git/{repo_name}"
        self.url = self.git_url

    @property
    def connections(self):
        return len(self.held)

    def accepted(self, conn):
        self.held.append(conn)

    def closed(self):
        for conn in self.held:
            conn.close()
