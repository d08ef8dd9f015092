"""The README's two quick starts work as written: each ```sh block under a
"Quick start" heading of README.md is run by bash in a scratch directory with
the built binaries (build/bin replaced by the bin dir given, port 3117 by a
free one), and must exit 0 within its deadline; the serve quick start must
end with the run "succeeded" after a restore on an empty disk, the run quick
start with exit 75 and then 0. A user's first five minutes cannot silently
break.

    python3 tests/docs/check_quickstart.py REPO_ROOT BIN_DIR
"""
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

DEADLINE_S = 25


def blocks(readme):
    """(heading, code) of each sh block under a Quick start heading."""
    out, heading, code = [], None, None
    for line in readme.splitlines():
        if code is not None:
            if line.startswith("```"):
                out.append((heading, "\n".join(code)))
                code = None
            else:
                code.append(line)
        elif line.startswith("## "):
            heading = line[3:] if line.startswith("## Quick start") else None
        elif line.startswith("```sh") and heading:
            code = []
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    root, bin_dir = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    found = blocks((root / "README.md").read_text(encoding="utf-8"))
    if len(found) != 2:
        print(f"expected two quick start blocks in README.md, found {len(found)}")
        return 1
    failed = 0
    for heading, code in found:
        port = free_port()
        script = code.replace("$PWD/build/bin", str(bin_dir)).replace("3117", str(port))
        # The reader's shell waits on curl's output; here each line's output
        # is shown on failure. set -u catches a variable the block lost.
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, TMPDIR=tmp, INFLIGHT_LISTEN=f"127.0.0.1:{port}")
            env = {k: v for k, v in env.items()
                   if not k.startswith("INFLIGHT_") or k == "INFLIGHT_LISTEN"}
            try:
                done = subprocess.run(["bash", "-uc", script], cwd=tmp, env=env,
                                      capture_output=True, text=True, timeout=DEADLINE_S)
            except subprocess.TimeoutExpired as error:
                print(f"{heading}: not done within {DEADLINE_S} s\n{error.stdout}\n{error.stderr}")
                failed += 1
                continue
        output = done.stdout
        ok = done.returncode == 0
        if "serve" in heading:
            ok = ok and re.search(r"^first\s+succeeded\s", output, re.M) is not None
        else:
            ok = ok and "exit 75" in output and output.rstrip().endswith("exit 0")
        status = "ok" if ok else "FAILED"
        print(f"{heading}: {status}")
        if not ok:
            failed += 1
            print(f"exit {done.returncode}\n--- stdout\n{output}\n--- stderr\n{done.stderr[-4000:]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
