"""The templates the tool pages show are the ones the tests run: a fenced
block right after a line `<!-- same as PATH -->` in docs/**/*.md must hold the
same JSON as PATH (relative to the repo root), and PATH must exist. The
examples' templates are exercised by tests/e2e/test_example_*.py, so a page
cannot show a template that drifted from the tested one.

    python3 tests/docs/check_snippets.py REPO_ROOT
"""
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from markdown import report  # noqa: E402

MARK = re.compile(r"^<!-- same as (\S+) -->$")


def problems(root):
    checked = 0
    for page in sorted((root / "docs").rglob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            mark = MARK.match(line.strip())
            if not mark:
                continue
            where = f"{page.relative_to(root)}:{i + 1}"
            source = root / mark.group(1)
            if not source.exists():
                yield f"{where}: no such file {mark.group(1)}"
                continue
            if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
                yield f"{where}: no fenced block after the mark"
                continue
            end = next((j for j in range(i + 2, len(lines)) if lines[j].startswith("```")), None)
            block = "\n".join(lines[i + 2:end])
            try:
                if json.loads(block) != json.loads(source.read_text(encoding="utf-8")):
                    yield f"{where}: differs from {mark.group(1)}"
            except json.JSONDecodeError as error:
                yield f"{where}: not JSON: {error}"
            checked += 1
    if checked == 0:
        yield "no <!-- same as PATH --> block found: the tool pages lost their marks"


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    return report(problems(root), "snippet(s) differ from their files", "every marked snippet equals its file")


if __name__ == "__main__":
    sys.exit(main())
