"""Every document the repo cites is in the repo, and every cited section is a heading of it.

A citation reads ``docs/<name>.md, "<Title>"`` (several titles may follow, joined by commas
or "and"). The notes the project was built from are not part of the repo, so nothing may
point at them: their names are assembled below from pieces, so this file does not match
itself.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
SUFFIXES = {".py", ".md", ".ipynb", ".toml", ".txt", ".json", ".yaml", ".yml", ".cfg", ".ini"}
SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints", "artifacts", ".pytest_cache"}

CITING = ("x402lab", "tests", "benchmarks", "notebooks", "docs", "README.md")
MENTION = re.compile(r"docs/([A-Za-z0-9_.-]+\.md)")
CITATION = re.compile(r'docs/([A-Za-z0-9_.-]+\.md),\s*((?:"[^"\n]+"(?:,\s*|\s+and\s+)?)+)')
MD_LINK = re.compile(r"\]\(([A-Za-z0-9_./-]+\.md)(?:#[^)]*)?\)")
OUTSIDE = (
    re.compile(r"(?<![A-Za-z0-9_])spec" + "/"),
    re.compile(re.escape("x402-protocol" + ".md")),
    re.compile(re.escape("DESIGN" + ".md")),
    re.compile(re.escape("STYLE" + ".md")),
    re.compile(re.escape(".." + "/shared")),
)


def _files(*roots: str) -> list[Path]:
    found: list[Path] = []
    for name in roots:
        root = REPO / name
        if root.is_file():
            found.append(root)
            continue
        for path in sorted(root.rglob("*")):
            if path.suffix in SUFFIXES and path.is_file() and not SKIP_DIRS & set(path.parts):
                found.append(path)
    assert found, f"nothing to read under {roots}"
    return found


def _where(path: Path, text: str, at: int) -> str:
    return f"{path.relative_to(REPO)}:{text.count(chr(10), 0, at) + 1}"


@cache
def _headings(name: str) -> frozenset[str]:
    """The heading titles of ``docs/<name>``, code fences skipped."""
    titles, fenced = set(), False
    for line in (DOCS / name).read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            titles.add(line.lstrip("#").strip().rstrip("#").strip())
    return frozenset(titles)


def test_every_cited_doc_exists():
    missing = [
        f"{_where(path, text, m.start())}: docs/{m.group(1)}"
        for path in _files(*CITING)
        for text in [path.read_text(encoding="utf-8")]
        for m in MENTION.finditer(text)
        if not (DOCS / m.group(1)).is_file()
    ]
    assert not missing, "cited documents not in docs/:\n" + "\n".join(missing)


def test_every_relative_markdown_link_resolves():
    broken = [
        f"{_where(path, text, m.start())}: {m.group(1)}"
        for path in _files("docs", "README.md")
        for text in [path.read_text(encoding="utf-8")]
        for m in MD_LINK.finditer(text)
        if not (path.parent / m.group(1)).is_file()
    ]
    assert not broken, "links to missing files:\n" + "\n".join(broken)


def test_every_cited_section_is_a_heading():
    wrong, seen = [], 0
    for path in _files(*CITING):
        text = path.read_text(encoding="utf-8")
        for m in CITATION.finditer(text):
            name = m.group(1)
            if not (DOCS / name).is_file():
                continue  # reported by test_every_cited_doc_exists
            for title in re.findall(r'"([^"\n]+)"', m.group(2)):
                seen += 1
                if title not in _headings(name):
                    wrong.append(f'{_where(path, text, m.start())}: docs/{name}, "{title}"')
    assert seen > 20, f"only {seen} section citations found: is the pattern still right?"
    assert not wrong, "cited sections that are no heading of their file:\n" + "\n".join(wrong)


@pytest.mark.parametrize("pattern", OUTSIDE, ids=lambda p: p.pattern)
def test_nothing_points_outside_the_repo(pattern: re.Pattern[str]):
    hits = [
        _where(path, text, m.start())
        for path in _files(*CITING)
        for text in [path.read_text(encoding="utf-8")]
        for m in pattern.finditer(text)
    ]
    assert not hits, f"mentions of a document outside the repo ({pattern.pattern}):\n" + "\n".join(
        hits
    )
