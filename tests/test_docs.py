"""The commands the README and docs/ show still work: each ``make`` target exists, each ``entropy-lens``
command line parses with the CLI's own parser, and each script or benchmark named is a file.

(Imports in the docs are run by ``tests/test_layers.py``.)
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from workflow_tiny import REPO

from entropy_lens.cli import _parser

PAGES = [REPO / "README.md", REPO / "benchmarks" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Code as a reader copies it: inline `spans` and the lines of fenced blocks.
INLINE = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)


def _code(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    blocks = [line for block in FENCE.findall(text) for line in block.splitlines()]
    return [*blocks, *INLINE.findall(FENCE.sub("", text))]


def _commands(program: str) -> list[tuple[str, str]]:
    """(page, argument text) of every ``program ...`` in the docs' code; comments and placeholders dropped."""
    found = []
    for page in PAGES:
        for code in _code(page):
            for part in re.split(r"&&|;|\|", code.split("  #")[0]):
                words = part.strip().split(maxsplit=1)
                if words and words[0] == program and "[" not in part and "<" not in part and "..." not in part:
                    found.append((page.name, words[1] if len(words) > 1 else ""))
    return found


def _make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return {m for line in text.splitlines() for m in re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", line)}


def test_every_make_target_in_the_docs_exists():
    targets, commands = _make_targets(), _commands("make")
    assert commands, "no make command found in the docs"
    for page, args in commands:
        named = [w for w in shlex.split(args) if not w.startswith("-") and "=" not in w]
        assert set(named) <= targets, f"{page}: make {args}: no target {sorted(set(named) - targets)}"


def test_every_entropy_lens_command_in_the_docs_parses():
    commands = [(page, args) for page, args in _commands("entropy-lens") if args]  # a bare name only names the tool
    assert len(commands) >= 5, commands
    parser = _parser()
    for page, args in commands:
        try:
            parser.parse_args(shlex.split(args))
        except SystemExit:
            pytest.fail(f"{page}: `entropy-lens {args}` does not parse")


def test_every_script_the_docs_name_is_a_file():
    named = {
        path
        for page in PAGES
        for code in _code(page)
        for path in re.findall(r"\b((?:scripts|benchmarks|workflow_scripts)/[\w/]+\.py)\b", code)
    }
    assert named, "no script found in the docs"
    missing = sorted(p for p in named if not (REPO / p).is_file())
    assert not missing, f"the docs name scripts that do not exist: {missing}"
