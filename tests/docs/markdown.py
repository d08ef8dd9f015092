"""What the docs checks share: the headings of a Markdown file as GitHub makes
their anchors, so that a link or a code comment naming a heading is judged by
the same rule GitHub uses to resolve it; and how a check reports."""
import functools
import re
from pathlib import Path

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text):
    """(line number, line) of every line outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    """GitHub's anchor for a heading: link syntax reduced to its text, lowercase,
    punctuation dropped, each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


@functools.cache
def anchors(path: Path):
    """Every anchor of a Markdown file, duplicates numbered as GitHub does;
    read once per file."""
    seen = {}
    out = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def report(problems, what_broke, all_good):
    """Prints each problem, then a summary line: a check's exit status."""
    found = list(problems)
    for problem in found:
        print(problem)
    if found:
        print(f"{len(found)} {what_broke}")
        return 1
    print(all_good)
    return 0
