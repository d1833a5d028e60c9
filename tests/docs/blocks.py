"""The fenced blocks of README.md and docs/*.md, with their docs-test annotations.

A command block is a fenced block whose info string is ``sh``/``bash`` (run by
bash) or ``python`` (run in one interpreter namespace per file). Other blocks
(``toml``, listings, untyped) are data and are not run. The HTML comment on
the line directly above a command block's fence says how the docs test treats
it, e.g. ``<!-- docs-test: skip (needs Kubernetes) -->``:

- ``skip (why)``: not run; the reason in parentheses is required;
- ``background``: each command of the block is a server, started in the
  background and waited for until it prints its ``listening on`` ready line;
  the servers run until the file's last block has run;
- ``own-standalone``: the file's own server stands in for ``make run``, so the
  test starts no standalone of its own for the file (``background`` servers
  otherwise get free ports where the standalone holds the default ones);
- ``compare``: the documented output is checked: in ``sh`` blocks the comment
  lines right after a command (``# text``) are its expected output lines (its
  ready line for ``background``); in ``python`` blocks a trailing comment on a
  ``print(...)`` line is the line it prints. ``...`` matches any text and runs
  of blanks match any run of blanks.

Several keywords may share one comment, separated by ``;``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Block", "blocks_of", "doc_files"]

ROOT = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r"^```(?P<info>[A-Za-z0-9_+-]*)\s*$")
_ANNOTATION = re.compile(r"^<!--\s*docs-test:\s*(?P<body>.*?)\s*-->\s*$")
_KEYWORD = re.compile(
    r"^(?P<word>skip|background|compare|own-standalone)(?:\s*\((?P<why>.*)\))?$")
COMMAND_LANGUAGES = {"sh": "sh", "bash": "sh", "python": "python"}


@dataclass
class Block:
    """One fenced block: where it is, its language, text and annotation."""

    path: Path
    line: int  # 1-based line of the opening fence
    info: str
    text: str
    skip_reason: str | None = None
    background: bool = False
    compare: bool = False
    own_standalone: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def language(self) -> str | None:
        """``sh`` or ``python`` for a command block, None for data."""
        return COMMAND_LANGUAGES.get(self.info)

    @property
    def where(self) -> str:
        """``docs/x.md:12 (sh block 3)``-style name for failure messages."""
        return f"{self.path.relative_to(ROOT)}:{self.line} ({self.info or 'untyped'} block)"

    def excerpt(self, lines: int = 3) -> str:
        head = self.text.splitlines()[:lines]
        return "\n".join(f"    | {line}" for line in head)


def doc_files() -> list[Path]:
    """README.md, then docs/*.md in name order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _parts(body: str) -> list[str]:
    """The keywords of an annotation: split at ``;`` outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in body:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == ";" and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return [part for part in parts if part]


def _annotate(block: Block, body: str) -> None:
    for part in _parts(body):
        match = _KEYWORD.match(part)
        if match is None:
            block.problems.append(f"unknown docs-test annotation {part!r} (skip (why), "
                                  "background, compare, own-standalone)")
            continue
        word, why = match["word"], match["why"]
        if word == "skip":
            if not why or not why.strip():
                block.problems.append("`docs-test: skip` needs its reason: skip (why)")
            block.skip_reason = (why or "").strip() or "no reason given"
        elif word == "background":
            block.background = True
        elif word == "own-standalone":
            block.own_standalone = True
        else:
            block.compare = True


def blocks_of(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, annotated."""
    lines = path.read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        block = Block(path, index + 1, opening["info"], "\n".join(lines[index + 1:end]) + "\n")
        above = lines[index - 1] if index > 0 else ""
        annotation = _ANNOTATION.match(above)
        if annotation is not None:
            _annotate(block, annotation["body"])
            if block.language is None:
                block.problems.append("a docs-test annotation on a block that is not run "
                                      "(only sh, bash and python blocks are)")
        found.append(block)
        index = end + 1
    return found
