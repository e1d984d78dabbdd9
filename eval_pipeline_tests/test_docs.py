"""The README stays a short front page and the docs stay linked: README.md is at most 250
lines and names the two commands exactly as the Makefile has them, CI runs the test one, and
every relative link in README.md and docs/*.md reaches a file (and a heading, for an anchor)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
MAX_README_LINES = 250

# Linked from here but written on another branch; checked like any other file once it exists.
PENDING = {"docs/plugins.md"}

FENCE = re.compile(r"^(```|~~~)")
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"(?<!\!)\[(?:[^\]\n]*)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks, inline code blanked out."""
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        out.append("" if fenced else INLINE_CODE.sub("``", line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, each
    space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if m is None:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def relative_links(path: Path) -> list[str]:
    links = []
    for line in prose_lines(path):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
                continue
            links.append(target)
    return links


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(doc: Path) -> None:
    problems = []
    for target in relative_links(doc):
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        rel = dest.relative_to(REPO).as_posix() if dest.is_relative_to(REPO) else str(dest)
        if not dest.exists():
            if rel not in PENDING:
                problems.append(f"{target}: no such file {rel}")
            continue
        if anchor and dest.is_file() and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{target}: no heading #{anchor} in {rel}")
    assert not problems, f"{doc.relative_to(REPO)}: " + "; ".join(problems)


def test_docs_exist() -> None:
    assert DOCS, "docs/*.md: none found"


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"


def test_readme_names_the_two_commands_and_ci_runs_the_test_one() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()[1:] if line.strip()]
    assert commands == ["make run", "make test"], commands

    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    for target in ("run", "test"):
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), f"Makefile has no {target}:"

    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    steps = [
        line.strip()
        for line in ci.splitlines()
        if line.strip() and not line.lstrip().startswith(("#", "set ", "cd "))
    ]
    assert steps == ["make test"], steps
