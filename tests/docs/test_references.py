"""Every document the code, the tests and the docs point at is in the repository.

A reference to notes kept elsewhere (a section sign, a Markdown file that is not here, a path outside the
checkout) leaves a newcomer with nothing to read: what the code needs is said in ``docs/`` or in place.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_MARKDOWN = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b")
_SCANNED = (
    "src",
    "tests",
    "docs",
    "benchmarks",
    "scripts",
    "examples",
    "README.md",
    "CHANGELOG.md",
    "pyproject.toml",
)


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *_SCANNED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    here = Path(__file__).resolve()
    files = []
    for name in listed:
        path = ROOT / name
        if path.resolve() == here or path.suffix not in {
            ".py",
            ".md",
            ".toml",
            ".yaml",
            ".yml",
            ".sql",
            ".txt",
            ".cfg",
            "",
        }:
            continue
        if path.is_file():
            files.append(path)
    return files


def _markdown_in_repository() -> set[str]:
    names = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {n for n in names} | {Path(n).name for n in names}


def test_no_section_signs() -> None:
    # A section sign points into a document by its numbering; a document kept here is linked by name (below).
    offending = []
    for path in _tracked_text_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if "§" in line:
                offending.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert offending == []


def test_every_markdown_file_named_exists_in_the_repository() -> None:
    known = _markdown_in_repository()
    missing = []
    for path in _tracked_text_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for name in _MARKDOWN.findall(line):
                if name not in known and Path(name).name not in known:
                    missing.append(f"{path.relative_to(ROOT)}:{number}: {name}")
    assert missing == []
