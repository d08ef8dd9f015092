"""The man page (apps/man_page.cmake) and docs/reference.md
(scripts/options-reference) each have a section for every command of the CLI
tree, as `inflight completion bash` lists its leaves: a command added to the
CLI cannot be left out of either.

    python3 tests/docs/check_man_page.py REPO_ROOT MAN_PAGE INFLIGHT_BINARY
"""
import re
import subprocess
import sys
from pathlib import Path


def main():
    root, man_page, binary = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    completion = subprocess.run([binary, "completion", "bash"], capture_output=True, text=True,
                                timeout=30, check=True).stdout
    table = completion[completion.index("local -A commands=("):completion.index("local -A flags=(")]
    tree = set(re.findall(r'\["inflight ([a-z0-9 -]+)"\]=""', table)) - {"help"}
    sections = {
        "the man page": set(re.findall(r'^\.SS "inflight ([a-z0-9 -]+)"$',
                                       man_page.read_text(encoding="utf-8"), re.M)),
        "docs/reference.md": set(re.findall(r"^## inflight ([a-z0-9 -]+)$",
                                            (root / "docs" / "reference.md").read_text(
                                                encoding="utf-8"), re.M)),
    }
    failed = False
    for where, found in sections.items():
        if found != tree:
            failed = True
            print(f"{where}: missing {sorted(tree - found)}, not commands {sorted(found - tree)}")
    if not failed:
        print(f"the man page and docs/reference.md cover the {len(tree)} commands")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
