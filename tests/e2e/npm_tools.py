"""The real eval tools of examples/, installed with `npm ci` from each
example's lock file into a cache outside the repo, once per lock."""
import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest


def npm_install(example, name, *npm_flags):
    """`npm ci` of the example's package-lock.json into a cache outside the
    repo keyed by the lock's hash (${XDG_CACHE_HOME:-~/.cache}/inflight-tests/
    NAME-HASH), once per lock; returns its node_modules/.bin. Skips when npm
    is absent; a failing install fails."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed")
    digest = hashlib.sha256()
    for f in ("package.json", "package-lock.json"):
        digest.update((example / f).read_bytes())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "inflight-tests"
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / f"{name}-{digest.hexdigest()[:16]}"
    with open(cache / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be installing it
        if not (target / ".installed").exists():
            staging = cache / f".{target.name}.partial"
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir()
            for f in ("package.json", "package-lock.json"):
                shutil.copy(example / f, staging / f)
            proc = subprocess.run(
                [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", *npm_flags],
                cwd=staging, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)
            assert proc.returncode == 0, f"npm ci of {example} failed:\n{proc.stderr[-4000:]}"
            (staging / ".installed").write_text(" ".join(npm_flags) + "\n")
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)
            for old in cache.glob(f"{name}-*"):  # earlier locks of this example
                if old != target:
                    shutil.rmtree(old, ignore_errors=True)
    return target / "node_modules" / ".bin"
