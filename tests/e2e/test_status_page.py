"""The status page (docs/serve.md "Status page") in a real headless Chromium: GET /
is a self-contained shell that needs no token and holds no data; the page
asks for the API token, keeps it in the tab's sessionStorage only, shows each
run's status, progress, attempts, checkpoint health and log, refreshes in
place without reloading, and shows hostile values as text, never as markup."""
import base64
import hashlib
import json
import os
import re
import secrets
from pathlib import Path
from types import SimpleNamespace

import pytest

from inflight_testing.browser import Browser
from inflight_testing.git_servers import free_port
from inflight_testing.waiting import wait_for
from conftest import BIN_DIR, DEMO, PYTHON, write_config

TOKEN = f"page-{secrets.token_hex(12)}"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# In a template's argv (so in the run's command) and in what the child prints.
HOSTILE = "<b>bold</b><img src=x onerror=\"document.title='owned'\">"
PAGE_TITLE = "inflight runs"


def demo_child():
    """The demo template as serve has it without a config (docs/serve.md)."""
    return {"argv": [str(DEMO), "--output", "{output_dir}", "--tests", "{tests}",
                     "--test-ms", "{test_ms}"],
            "resume_argv": ["--resume"],
            "params": {"tests": {"type": "integer", "min": 0, "max": 99999, "default": 20},
                       "test_ms": {"type": "integer", "min": 0, "max": 86400000, "default": 500}},
            "progress_file": "index.jsonl", "progress_total": "{tests}"}


def hostile_child():
    """Prints its argument, markup, and fails (exit 15)."""
    return {"argv": [PYTHON, "-c", "import sys; print(sys.argv[1]); sys.exit(15)", HOSTILE]}


def submit(serve, **params):
    r = serve.post("/api/eval/run", params, headers=AUTH)
    assert r.status == 202, r.body
    return r.json()["id"]


def status(serve, run_id):
    r = serve.get(f"/api/eval/status/{run_id}", headers=AUTH)
    assert r.status == 200, r.body
    return r.json()


def wait_status(serve, run_id, wanted):
    return wait_for(lambda: (s := status(serve, run_id))["status"] == wanted and s, 30,
                    f"run {run_id} to become {wanted}")


def artifact(name):
    """Where a test leaves a file for a person: $INFLIGHT_TEST_ARTIFACTS, else
    test-artifacts/ in the build dir."""
    directory = os.environ.get("INFLIGHT_TEST_ARTIFACTS") or BIN_DIR.parent / "test-artifacts"
    return Path(directory) / name


def assert_png(path):
    data = path.read_bytes()
    assert len(data) > 1000 and data.startswith(b"\x89PNG\r\n\x1a\n"), path


@pytest.fixture
def browser(tmp_path):
    with Browser(tmp_path / "chromium") as b:
        yield b


@pytest.fixture
def pod(serve_factory, tmp_path):
    """A serve with the API token and three runs: one running for a while,
    one succeeded, one failed whose command and log hold markup."""
    config = write_config(tmp_path / "config.json", demo_child(),
                          children={"hostile": hostile_child()})
    serve = serve_factory("--config", config, "--api-token", TOKEN, "--checkpoint-interval", "1s")
    serve.wait_ready()
    runs = SimpleNamespace(running=submit(serve, tests=500, test_ms=100),
                           finished=submit(serve, tests=3, test_ms=1),
                           failed=submit(serve, child="hostile"))
    wait_status(serve, runs.finished, "succeeded")
    wait_status(serve, runs.failed, "failed")
    return serve, runs


# --------------------------------------------------------------------------
# what the tests read in the page

FORM_SHOWN = "!document.getElementById('login').hidden"
ROWS = "document.querySelectorAll('#runs-body tr').length"


def row(run_id):
    """A JS expression: the table row of that run."""
    return ("Array.from(document.querySelectorAll('#runs-body tr'))"
            f".find(tr => tr.innerText.includes({json.dumps(run_id)}))")


def row_text(page, run_id):
    return page.evaluate(f"({row(run_id)} || {{innerText: ''}}).innerText")


def wait_row(page, run_id, predicate, what, timeout=30):
    """The row's text once `predicate` holds for it."""
    return wait_for(lambda: (t := row_text(page, run_id)) and predicate(t) and t, timeout,
                    f"the row of {run_id} to show {what}")


def progress(text, total):
    found = re.search(rf"(\d+) / {total}\b", text)
    return int(found.group(1)) if found else None


def enter_token(page, token):
    page.type("document.getElementById('token')", token)
    page.press_enter()


def open_with_token(browser, serve):
    page = browser.new_page()
    page.navigate(serve.url + "/")
    page.wait(FORM_SHOWN, 10, "the page to ask for the token")
    enter_token(page, TOKEN)
    page.wait(f"{ROWS} > 0", 10, "the runs")
    return page


# --------------------------------------------------------------------------


def inline(html, tag):
    [body] = re.findall(rf"<{tag}>(.*?)</{tag}>", html, re.S)
    return body


def hash_source(text):
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_page_needs_no_token_holds_no_data_and_loads_nothing_else(pod):
    serve, runs = pod
    r = serve.get("/")
    assert r.status == 200
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["Cache-Control"] == "no-store"
    policy = {d.split()[0]: d.split()[1:] for d in r.headers["Content-Security-Policy"].split(";")}
    assert policy["default-src"] == ["'none'"] and policy["connect-src"] == ["'self'"]
    # Only the page's own inline script and style, by their hashes.
    assert policy["script-src"] == [hash_source(inline(r.body, "script"))]
    assert policy["style-src"] == [hash_source(inline(r.body, "style"))]
    markup = r.body.replace(inline(r.body, "script"), "")
    assert set(re.findall(r"""\b(?:src|href)\s*=\s*["']?([^"' >]*)""", markup)) == {"data:,"}
    assert "url(" not in inline(r.body, "style") and "@import" not in inline(r.body, "style")
    for value in (*vars(runs).values(), HOSTILE, str(DEMO)):
        assert value not in r.body
    # Only GET / is open; the data behind it is not.
    refused = serve.get("/api/eval/runs")
    assert refused.status == 401 and refused.headers["X-Content-Type-Options"] == "nosniff"
    assert serve.post("/", b"{}").status == 401
    assert serve.get("/", headers=AUTH).body == r.body


def test_the_page_asks_for_the_token_and_shows_every_run_live(pod, browser):
    serve, runs = pod
    page = browser.new_page()
    page.navigate(serve.url + "/")
    page.wait(FORM_SHOWN, 10, "the page to ask for the token")
    assert page.evaluate(ROWS) == 0

    enter_token(page, "wrong-" + TOKEN)
    page.wait("document.getElementById('login-note').textContent.includes('refused')", 10,
              "the wrong token to be refused")
    assert page.evaluate(FORM_SHOWN) and page.evaluate(ROWS) == 0
    assert page.evaluate("sessionStorage.length") == 0

    page.evaluate("window.loadedOnce = 'this document'; true")
    enter_token(page, TOKEN)
    for run_id in vars(runs).values():
        wait_row(page, run_id, lambda t: True, "its id")
    assert not page.evaluate(FORM_SHOWN)

    running = wait_row(page, runs.running, lambda t: "running" in t and progress(t, 500) is not None,
                       "running, records of 500")
    assert "attempt 1" in running and "0 interruptions" in running
    finished = row_text(page, runs.finished)
    assert "succeeded" in finished and "3 / 3" in finished and "exit code 0" in finished
    failed = row_text(page, runs.failed)
    assert "failed" in failed and "exit code 15" in failed

    # Refreshed in place: progress moves, the document is the same one.
    first = progress(running, 500)
    wait_row(page, runs.running, lambda t: progress(t, 500) > first, "more records")
    assert page.evaluate("window.loadedOnce") == "this document"  # a reload would drop it
    wait_row(page, runs.running, lambda t: re.search(r"saved \d+s ago", t), "a landed checkpoint")

    # Markup from the API is text: in the command, and in the log below.
    assert status(serve, runs.failed)["command"] in failed and "<b>bold</b><img src=x" in failed
    assert page.evaluate("document.querySelectorAll('main b, main img').length") == 0
    assert page.evaluate("document.title") == PAGE_TITLE

    # The token is in this tab's sessionStorage only.
    assert page.evaluate(f"Object.values(sessionStorage).includes({json.dumps(TOKEN)})")
    assert page.evaluate("localStorage.length") == 0
    assert page.evaluate("document.cookie") == ""

    page.click(f"{row(runs.finished)}.querySelector('a')")
    page.wait("document.getElementById('log-text').textContent.includes('all 3 tests done')", 10,
              "the finished run's log")
    page.click(f"{row(runs.failed)}.querySelector('a')")
    page.wait(f"document.getElementById('log-text').textContent.includes({json.dumps(HOSTILE)})",
              10, "the failed run's log, markup as text")
    assert page.evaluate("document.querySelectorAll('main b, main img').length") == 0
    assert page.evaluate("document.title") == PAGE_TITLE
    assert page.evaluate("window.loadedOnce") == "this document"

    shot = page.screenshot(artifact("status-page.png"))
    assert_png(shot)

    page.click("document.getElementById('forget')")
    page.wait(f"{FORM_SHOWN} && {ROWS} === 0", 10, "the page to forget the token and the runs")
    assert page.evaluate("sessionStorage.length") == 0
    assert page.evaluate("document.getElementById('log').hidden")


# Before the page's script: each refresh timer (a setTimeout of the page's 2 s) and each fetch is
# counted while pending, and `document.hidden` answers what the test says.
COUNT_TIMERS_AND_FETCHES = """
window.testHidden = false;
Object.defineProperty(document, 'hidden', {get: () => window.testHidden, configurable: true});
window.refreshTimers = new Set();
window.timersWhileHidden = 0;
window.fetches = {started: 0, pending: 0};
const realSetTimeout = window.setTimeout, realClearTimeout = window.clearTimeout;
window.setTimeout = (f, ms, ...a) => {
  if (ms !== 2000) return realSetTimeout(f, ms, ...a);
  if (window.testHidden) window.timersWhileHidden++;
  const id = realSetTimeout(() => { window.refreshTimers.delete(id); f(...a); }, ms);
  window.refreshTimers.add(id);
  return id;
};
window.clearTimeout = (id) => { window.refreshTimers.delete(id); realClearTimeout(id); };
const realFetch = window.fetch;
window.fetch = async (...a) => {
  window.fetches.started++; window.fetches.pending++;
  try { return await realFetch(...a); } finally { window.fetches.pending--; }
};
"""


# Hides the tab; the value is [refresh timers, requests under way] right after.
HIDE = ("(window.testHidden = true, document.dispatchEvent(new Event('visibilitychange')), "
        "[window.refreshTimers.size, window.fetches.pending])")
SHOW = "(window.testHidden = false, document.dispatchEvent(new Event('visibilitychange')), true)"


# A hidden tab asks serve for nothing: hiding it drops the pending refresh timer at once, and with
# no timer and no request under way nothing but showing the tab can start one; shown, it
# refreshes at once and goes on.
def test_a_hidden_tab_pauses_its_refresh_and_resumes_when_shown(pod, browser):
    serve, _ = pod
    page = browser.new_page()
    page.call("Page.enable")
    page.call("Page.addScriptToEvaluateOnNewDocument", {"source": COUNT_TIMERS_AND_FETCHES})
    page.navigate(serve.url + "/")
    page.wait(FORM_SHOWN, 10, "the page to ask for the token")
    enter_token(page, TOKEN)
    # Hidden in the same turn of the page's loop as a timer is seen pending and no request under
    # way; right after, [refresh timers, requests under way] must be [0, 0].
    hidden = page.wait(f"{ROWS} > 0 && window.refreshTimers.size === 1 && "
                       f"window.fetches.pending === 0 && {HIDE}", 10,
                       "runs, a refresh timer and no request under way")
    assert hidden == [0, 0]
    quiet = page.evaluate("window.fetches.started")

    page.evaluate(SHOW)
    page.wait(f"window.fetches.started > {quiet}", 5, "a refresh as soon as the tab shows")
    page.wait("window.refreshTimers.size === 1", 10, "the refresh timer again")
    assert page.evaluate("window.timersWhileHidden") == 0


def test_a_run_whose_checkpoints_fail_shows_since_when_and_why(serve_factory, browser):
    # Nothing listens there: every push fails, the run goes on.
    serve = serve_factory("--api-token", TOKEN, "--results-repo",
                          f"git://127.0.0.1:{free_port()}/results.git", "--git-timeout", "2s",
                          "--checkpoint-interval", "300ms")
    serve.wait_ready()
    run_id = submit(serve, tests=500, test_ms=100)
    failing = wait_for(lambda: (s := status(serve, run_id))["checkpoint"]["error"] and s, 30,
                       "a failed checkpoint")
    since = failing["checkpoint"]["failing_since"]
    assert since

    page = open_with_token(browser, serve)
    shown = wait_row(page, run_id,
                     lambda t: re.search(r"failing for \d+s", t) and f"since {since}" in t
                     and status(serve, run_id)["checkpoint"]["error"] in t,
                     "the checkpoint failing, since when, with the API's error")
    assert "running" in shown and progress(shown, 500) is not None
    assert page.evaluate(f"{row(run_id)}.classList.contains('failing')")
    assert_png(page.screenshot(artifact("status-page-failing-checkpoint.png")))
