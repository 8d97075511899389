"""The pages in ``docs/`` stay true: every test they cite exists, every file they name
is there, and every code block is either a verbatim excerpt of a tested example, runs
as written, or says why it is skipped."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
CITED = re.compile(r"`((?:tests|property_tests)/[\w/]+\.py)::(\w+)`")
FILES = re.compile(r"`((?:tests|property_tests|examples|src)/[\w/.]+\.py)`")
BLOCK = re.compile(
    r"(?:<!-- docs-test: (?P<marker>[^\n]*?) -->\n)?```python\n(?P<code>.*?)```", re.S
)


def test_the_pages_exist() -> None:
    assert {p.name for p in DOCS} >= {"guarantees.md", "events.md", "cookbook.md"}


@pytest.mark.parametrize("page", DOCS, ids=[p.name for p in DOCS])
def test_every_cited_test_exists(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    cited = CITED.findall(text)
    if page.name == "guarantees.md":
        assert len(cited) >= 30
    for path, name in cited:
        source = (ROOT / path).read_text(encoding="utf-8")
        assert re.search(rf"^(async )?def {name}\(", source, re.M), f"{path}::{name}"
    for path in FILES.findall(text):
        assert (ROOT / path).is_file(), path


def _blocks(page: Path) -> list[tuple[str, str]]:
    text = page.read_text(encoding="utf-8")
    return [(m.group("marker") or "", m.group("code")) for m in BLOCK.finditer(text)]


EXAMPLE_TEXT = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "examples").glob("*.py"))


@pytest.mark.parametrize("page", DOCS, ids=[p.name for p in DOCS])
def test_every_code_block_is_tested(page: Path, tmp_path: Path) -> None:
    for marker, code in _blocks(page):
        if marker:
            assert re.fullmatch(r"skip \(.+\)", marker), marker
            continue
        if textwrap.dedent(code).strip() in EXAMPLE_TEXT:
            continue  # a verbatim excerpt of an example that tests/test_examples.py runs
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")},
        )
        assert done.returncode == 0, f"{page.name}:\n{code}\n{done.stderr}"
