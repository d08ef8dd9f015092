"""Every relative link in the docs leads somewhere: README.md, ARCHITECTURE.md, docs/**/*.md and
examples/**/README.md are read, and a link to a file that does not exist, or
to a `#heading` that file does not have (by GitHub's anchor rule), fails with
the file, line and link. Moving or renaming a page or a heading cannot leave a
dead link behind. External (http, https, mailto) links are not fetched.

    python3 tests/docs/check_links.py REPO_ROOT
"""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from markdown import anchors, prose_lines, report  # noqa: E402

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"`[^`]*`")


def pages(root):
    yield root / "README.md"
    yield root / "ARCHITECTURE.md"
    yield from sorted((root / "docs").rglob("*.md"))
    yield from sorted((root / "examples").rglob("README.md"))


def problems(root):
    for page in pages(root):
        if "node_modules" in page.parts:
            continue
        for number, line in prose_lines(page.read_text(encoding="utf-8")):
            for target in LINK.findall(INLINE_CODE.sub("", line)):
                if re.match(r"^[a-z]+:", target):
                    continue
                path_part, _, anchor = target.partition("#")
                dest = (page.parent / path_part).resolve() if path_part else page
                where = f"{page.relative_to(root)}:{number}: {target}"
                if not dest.exists():
                    yield f"{where}: no such file"
                    continue
                if anchor:
                    if dest.suffix != ".md":
                        yield f"{where}: an anchor into a file that is not Markdown"
                        continue
                    if anchor not in anchors(dest):
                        yield f"{where}: no heading with anchor #{anchor}"


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    return report(problems(root), "broken link(s)", "every relative link and anchor resolves")


if __name__ == "__main__":
    sys.exit(main())
