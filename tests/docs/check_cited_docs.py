"""Every page and heading a code comment cites exists, so that a comment's
pointer to the documentation cannot go stale when the docs move.

The one citation form for code comments is a docs file, optionally with the
heading it means, quoted as the heading is written:

    docs/security.md "Process containment"
    docs/serve.md "The two budgets"

(a `#anchor` form, docs/security.md#process-containment, is accepted too).
The quoted heading may wrap onto the next comment line. README.md may be
cited the same way. The form the code used before the manual existed, the
word README followed by a quoted section, is still checked: its section must
be a heading of README.md, which holds none of the old sections any more.

Scanned: *.cpp, *.hpp, *.h, *.py, *.sh, *.cmake, *.html, CMakeLists.txt,
scripts/*, Containerfiles and deploy/**, outside build*/ and node_modules/.

    python3 tests/docs/check_cited_docs.py REPO_ROOT
"""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from markdown import anchors, report, slug  # noqa: E402

SUFFIXES = {".cpp", ".hpp", ".h", ".py", ".sh", ".cmake", ".html"}
# A path, then a #anchor, or a quoted heading after blanks that may hold a
# line break and the next line's comment marker.
CITATION = re.compile(
    r"(?<![\w/.-])(?P<path>README(?:\.md)?|docs/[\w./-]+?\.md)"
    r"(?:#(?P<anchor>[\w-]+)"
    r"|[ \t]*(?:\n[ \t]*(?://|#|\*|<!--)?[ \t]*)?\"(?P<heading>[^\"\n]+(?:\n[^\"\n]+)?)\")?")
COMMENT_MARK = re.compile(r"\n[ \t]*(?://|#|\*)?[ \t]*")


def scanned(root):
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or any(p.startswith("build") or p in ("node_modules", ".git")
                                     for p in rel.parts[:-1]):
            continue
        if (path.suffix in SUFFIXES or path.name == "CMakeLists.txt"
                or path.name.startswith("Containerfile") or rel.parts[0] in ("scripts", "deploy")):
            yield path


def problems(root):
    for path in scanned(root):
        # tests/docs/ and the generator describe the forms; they cite nothing.
        if path.parent == root / "tests" / "docs":
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for match in CITATION.finditer(text):
            cited = match.group("path")
            doc = root / ("README.md" if cited == "README" else cited)
            line = text.count("\n", 0, match.start()) + 1
            where = f"{path.relative_to(root)}:{line}: {match.group(0).strip()!r}"
            if not doc.exists():
                yield f"{where}: no such file {doc.relative_to(root)}"
                continue
            anchor = match.group("anchor")
            heading = match.group("heading")
            if heading:
                anchor = slug(COMMENT_MARK.sub(" ", heading).strip())
            if anchor and anchor not in anchors(doc):
                yield f"{where}: {doc.relative_to(root)} has no heading #{anchor}"


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    return report(problems(root), "citation(s) of the docs point nowhere", "every cited docs page and heading exists")


if __name__ == "__main__":
    sys.exit(main())
