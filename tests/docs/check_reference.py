"""docs/reference.md is what scripts/options-reference makes from the built
binary's --help: regenerates it from the binary given and fails with a diff
when the committed page differs, so that an option added, renamed or given a
new default cannot leave the reference behind. Fix: run
`scripts/options-reference build/bin/inflight --output docs/reference.md`.

    python3 tests/docs/check_reference.py REPO_ROOT INFLIGHT_BINARY
"""
import difflib
import subprocess
import sys
from pathlib import Path


def main():
    root, binary = Path(sys.argv[1]).resolve(), sys.argv[2]
    fresh = subprocess.run([sys.executable, str(root / "scripts" / "options-reference"), binary],
                           capture_output=True, text=True, timeout=60, check=True).stdout
    committed = (root / "docs" / "reference.md").read_text(encoding="utf-8")
    if fresh == committed:
        print("docs/reference.md matches the binary's --help")
        return 0
    sys.stdout.writelines(difflib.unified_diff(
        committed.splitlines(True), fresh.splitlines(True), "docs/reference.md (committed)",
        "docs/reference.md (from --help)"))
    print("docs/reference.md is stale: run scripts/options-reference "
          f"{binary} --output docs/reference.md")
    return 1


if __name__ == "__main__":
    sys.exit(main())
