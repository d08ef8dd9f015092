"""A real headless Chromium for the tests of the status page, driven over the
DevTools protocol with the stdlib only: `--remote-debugging-pipe` reads
commands from fd 3 and writes replies and events to fd 4, each a JSON object
ending in a NUL byte, so no websocket client is needed. Debian's `chromium`
(scripts/setup --test installs it)."""

import base64
import fcntl
import json
import os
import shutil
import subprocess
import threading
import time

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium():
    """The browser's path; fails the test, naming the fix, when there is none."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    raise AssertionError("no chromium on PATH (scripts/setup --test installs Debian's chromium)")


def high_fd(fd):
    """`fd` moved to 10 or above, so that the child's `3<&N 4>&M` never
    overwrites one of the two before it is copied."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class DevToolsError(AssertionError):
    pass


class Browser:
    """One headless Chromium with its own profile in `profile_dir`; its
    stderr goes to `profile_dir`/chromium.log. Use as a context manager."""

    def __init__(self, profile_dir, window=(1200, 900)):
        profile_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = profile_dir / "chromium.log"
        to_browser_r, self._to_browser = (high_fd(fd) for fd in os.pipe())
        self._from_browser, from_browser_w = (high_fd(fd) for fd in os.pipe())
        args = [find_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                "--remote-debugging-pipe", f"--user-data-dir={profile_dir}", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-sync",
                "--disable-background-networking", "--disable-component-update",
                "--password-store=basic", "--use-mock-keychain", "--mute-audio",
                f"--window-size={window[0]},{window[1]}", "about:blank"]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                ["/bin/bash", "-c",
                 f'exec "$@" 3<&{to_browser_r} 4>&{from_browser_w} {to_browser_r}<&- {from_browser_w}>&-',
                 "bash", *args],
                pass_fds=(to_browser_r, from_browser_w), stdin=subprocess.DEVNULL,
                stdout=log, stderr=log)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next_id = 0
        self._replies = {}
        self._closed = False
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        pending = b""
        while True:
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                break
            pending += chunk
            *messages, pending = pending.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                if "id" in message:
                    with self._changed:
                        self._replies[message["id"]] = message
                        self._changed.notify_all()
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def call(self, method, params=None, session=None, timeout=30):
        """One DevTools command; its result, or DevToolsError with the
        browser's error."""
        with self._changed:
            self._next_id += 1
            message_id = self._next_id
        message = {"id": message_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._changed:
            while message_id not in self._replies:
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    raise DevToolsError(f"no answer to {method}; see {self.log_path}")
                self._changed.wait(left)
            reply = self._replies.pop(message_id)
        if "error" in reply:
            raise DevToolsError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def new_page(self):
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        return Page(self, session)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.call("Browser.close", timeout=5)
            except DevToolsError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        os.close(self._to_browser)
        self._reader.join(timeout=5)
        os.close(self._from_browser)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Page:
    """One tab, attached with its own DevTools session."""

    def __init__(self, browser, session):
        self.browser = browser
        self.session = session

    def call(self, method, params=None, timeout=30):
        return self.browser.call(method, params, self.session, timeout)

    def navigate(self, url, timeout=30):
        """Loads `url` and waits until its document has loaded."""
        result = self.call("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise DevToolsError(f"navigating to {url}: {result['errorText']}")
        self.wait("document.readyState === 'complete'", timeout, f"{url} to load")

    def evaluate(self, expression):
        """The value of a JS expression in the page (a promise is awaited)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise DevToolsError(f"{expression}: {details.get('exception', details)}")
        return result["result"].get("value")

    def wait(self, expression, timeout, what, interval=0.05):
        """Polls a JS expression until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}; "
                                     f"the page says:\n{self.evaluate('document.body.innerText')}")
            time.sleep(interval)

    def click(self, element):
        """A mouse click at the middle of the element a JS expression names,
        scrolled into view first, as a person clicks it."""
        x, y = self.evaluate(f"""(() => {{
            const e = {element};
            e.scrollIntoView({{block: "center"}});
            const r = e.getBoundingClientRect();
            return [r.x + r.width / 2, r.y + r.height / 2];
        }})()""")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent",
                      {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def type(self, element, text):
        """Focuses the element a JS expression names and types `text` into it."""
        self.evaluate(f"{element}.focus(); true")
        self.call("Input.insertText", {"text": text})

    def press_enter(self):
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent",
                      {"type": kind, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13,
                       **({"text": "\r"} if kind == "keyDown" else {})})

    def screenshot(self, path):
        """A PNG of the whole page at `path`."""
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data["data"]))
        return path
