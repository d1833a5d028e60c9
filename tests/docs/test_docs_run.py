"""Docs that run: every command block of README.md and docs/*.md, executed in order.

One test per Markdown file (tests/docs/runner.py: a working directory, the
environment and Python namespace its blocks share, a ``folio standalone``
playing ``make run`` unless the file starts servers of its own, ports moved to
free ones). A block that cannot run here carries
``<!-- docs-test: skip (why) -->`` above its fence (tests/docs/blocks.py has
the annotations); documented output is compared where a block is marked
``compare``. A failure names the file, the line of the block's fence and the
command, so a doc that drifts from the code fails `make test` at its line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import folio
from tests.docs.blocks import ROOT, Block, blocks_of, doc_files
from tests.docs.runner import DocRun

pytestmark = pytest.mark.timeout(1200)


def test_every_command_block_runs_or_says_why_not() -> None:
    """Annotations are well formed; a skipped block says why; some blocks run."""
    problems, run = [], 0
    for path in doc_files():
        for block in blocks_of(path):
            problems += [f"{block.where}: {problem}" for problem in block.problems]
            if block.language is not None and block.skip_reason is None:
                run += 1
    assert problems == []
    assert run >= 20


_LINK = re.compile(r"\]\((?P<target>[^)\s#]+)(?:#[^)]*)?\)")
_INLINE_CODE = re.compile(r"`[^`]*`")
_PATH = re.compile(r"`(?P<path>(?:\.\./|/work/)[^`\s]*)`")


def test_docs_point_only_into_the_repository() -> None:
    """Links and paths in the docs resolve inside a clone (no ../shared/, no /work/)."""
    pages = [*doc_files(), ROOT / "CONTRIBUTING.md", *sorted((ROOT / "deploy").rglob("README.md"))]
    problems = []
    for page in pages:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            where = f"{page.relative_to(ROOT)}:{number}"
            # A link is Markdown outside inline code (`RULE:[n:f](match)s/...` is none).
            for match in _LINK.finditer(_INLINE_CODE.sub("", line)):
                target = match["target"]
                if re.match(r"^[a-z]+:", target):
                    continue  # http:, https:, mailto:
                resolved = (page.parent / target).resolve()
                if not resolved.is_relative_to(ROOT) or not resolved.exists():
                    problems.append(f"{where}: link {target} is not a file of the repository")
            problems += [f"{where}: path {m['path']} is outside the repository"
                         for m in _PATH.finditer(line)]
    assert problems == []


def _files_with_commands() -> list[Path]:
    return [path for path in doc_files()
            if any(b.language and b.skip_reason is None for b in blocks_of(path))]


@pytest.fixture
def doc_run(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DocRun]:
    path: Path = request.param
    own = any(b.own_standalone and b.skip_reason is None for b in blocks_of(path))
    run = DocRun(tmp_path / "work", shared_standalone=not own)
    yield run
    if run.client is not None:
        run.client.close()
    run.close()


@pytest.mark.parametrize("doc_run", _files_with_commands(), indirect=True,
                         ids=lambda path: str(path.relative_to(ROOT)))
def test_the_commands_of_a_doc_run_as_written(doc_run: DocRun,
                                              request: pytest.FixtureRequest) -> None:
    path: Path = request.node.callspec.params["doc_run"]
    blocks = [b for b in blocks_of(path) if b.language and b.skip_reason is None]
    shared = "standalone" in {name for name, _ in doc_run.servers}

    def client() -> Any:
        if doc_run.client is None:
            doc_run.client = folio.Client(f"localhost:{doc_run.port(7070)}", timeout_s=30)
        return doc_run.client

    ran: list[Block] = []
    for block in blocks:
        if block.language == "sh":
            doc_run.run_sh(block)
        else:
            doc_run.run_python(block, client if shared else None)
        ran.append(block)
    assert [b.line for b in ran] == [b.line for b in blocks]


def test_a_failure_names_the_file_line_and_command(tmp_path: Path) -> None:
    """What a drifted block reports: file, fence line, the command and its error; and a
    documented output that differs shows both lines."""
    run = DocRun(tmp_path / "work", shared_standalone=False)
    try:
        failing = Block(ROOT / "docs" / "example.md", 12, "sh",
                        "echo first\nfolio topic list --no-such-flag\necho never\n")
        with pytest.raises(AssertionError) as raised:
            run.run_sh(failing)
        message = str(raised.value)
        assert message.startswith("docs/example.md:12 (sh block): command 2 of the block failed")
        assert "$ folio topic list --no-such-flag" in message
        assert "unrecognized arguments: --no-such-flag" in message
        drifted = Block(ROOT / "docs" / "example.md", 30, "sh",
                        "echo 'topic orders'\n# topic payments\n", compare=True)
        with pytest.raises(AssertionError) as differs:
            run.run_sh(drifted)
        assert "docs/example.md:30 (sh block): `echo 'topic orders'`: documented output line 1" \
            in str(differs.value)
        assert "documented: topic payments" in str(differs.value)
    finally:
        run.close()
