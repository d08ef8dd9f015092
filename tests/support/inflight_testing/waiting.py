"""The one way tests and benchmarks wait: a condition polled until a
deadline, never a fixed sleep."""

import time


def wait_for(condition, timeout, what, interval=0.02):
    """Polls `condition` until it returns a truthy value, which is returned;
    raises AssertionError naming `what` when `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def holds_for(condition, seconds, what, interval=0.02):
    """Polls `condition` for `seconds`: how a test shows that something does
    not happen. Raises AssertionError naming `what` the first time it is
    false."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not condition():
            raise AssertionError(f"{what} no longer held")
        time.sleep(interval)
