"""The pages in ``docs/`` stay true: every test they cite exists, every file they name
is there, and every code block is either a verbatim excerpt of a tested example, runs
as written, or says why it is skipped. The documentation site they belong to renders
every public module, builds strict and offline, and every public name has a docstring."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.test_public_api import PUBLIC_MODULES

if TYPE_CHECKING:
    import types

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


# --- the documentation site: mkdocs.yml, the API pages, and the docstring check -------

MKDOCS = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def _site_module(name: str) -> types.ModuleType:
    """A module of ``docs/hooks/`` (the docs build loads them by path, not by import)."""
    pytest.importorskip("griffe", reason="the docstring check reads the code with griffe")
    spec = importlib.util.spec_from_file_location(f"site_{name}", ROOT / "docs/hooks" / name)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_public_name_has_a_docstring() -> None:
    """What the docs build checks (its hook warns, strict mode fails): every name of each
    public module's ``__all__``, and every public field, property and method of each
    public class, has a docstring or an entry in its class's Attributes/Args section."""
    check = _site_module("docstrings.py")
    assert check.undocumented(check.rendered_modules()) == []


def test_the_reference_renders_every_public_module() -> None:
    check = _site_module("docstrings.py")
    assert sorted(check.rendered_modules()) == sorted(PUBLIC_MODULES)


def test_the_docstring_check_finds_every_kind_of_gap(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent(
            '''
            """A package."""
            from ._impl import Base, Documented, Gappy, bare, described

            __all__ = ["Base", "Documented", "Gappy", "Alias", "bare", "described"]

            Alias = int | str
            '''
        )
    )
    (package / "_impl.py").write_text(
        textwrap.dedent(
            '''
            class _Private:
                inherited: int = 0

            class Base:
                """A public base.

                Attributes:
                    listed_on_base: a field.
                """
                listed_on_base: int = 0

            class Documented(Base):
                """Every member documented, each way the check accepts.

                Attributes:
                    listed: a field.
                """
                listed: int = 0
                own: int = 0
                """A field with its own docstring."""

                def method(self) -> None:
                    """A method."""

            class Gappy(_Private):
                """Gaps in members only."""
                field: int = 0

                def method(self) -> None:
                    pass

                @property
                def prop(self) -> int:
                    return 0

                def _private(self) -> None:
                    pass

            def bare() -> None:
                pass

            def described() -> None:
                """Documented."""
            '''
        )
    )
    check = _site_module("docstrings.py")
    gaps = check.undocumented(["pkg"], search_path=tmp_path)
    assert sorted(gaps) == [
        "pkg.Alias",
        "pkg.Gappy.field",
        "pkg.Gappy.inherited",  # from a private base: the public class must say it
        "pkg.Gappy.method",
        "pkg.Gappy.prop",
        "pkg.bare",
    ]


def test_sphinx_roles_become_cross_references() -> None:
    roles = _site_module("roles.py")
    text = "See :class:`Tool`, :meth:`~trio_agent.AgentRun.abort` and :func:`repair()`."
    assert roles.ROLE.sub(roles.as_link, text) == (
        "See [`Tool`][Tool], [`abort`][trio_agent.AgentRun.abort] and [`repair`][repair]."
    )


def test_the_site_config_is_strict_and_offline() -> None:
    assert re.search(r"^strict: true$", MKDOCS, re.M)
    # Material loads Google Fonts unless told not to; no remote object inventories.
    assert re.search(r"^  font: false$", MKDOCS, re.M)
    assert not re.search(r"^\s*(- )?(import|inventories):", MKDOCS, re.M)
    assert "docs/hooks/docstrings.py" in MKDOCS
    assert "docs/hooks/roles.py:SphinxRoles" in MKDOCS


def test_the_site_holds_every_page() -> None:
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    in_nav = set(re.findall(r"^\s+- (?:[^:\n]+: )?([\w/]+\.md)$", MKDOCS, re.M))
    assert pages == in_nav


def test_events_page_lists_every_end_reason_and_outcome() -> None:
    import typing

    import trio_agent

    text = (ROOT / "docs" / "events.md").read_text(encoding="utf-8")
    for reason in typing.get_args(trio_agent.EndReason):
        assert f"| `{reason}` |" in text, reason
    for outcome in typing.get_args(trio_agent.ToolOutcome):
        assert f"`{outcome}`" in text, outcome


@pytest.mark.parametrize("page", DOCS, ids=[p.name for p in DOCS])
def test_pages_name_only_public_api(page: Path) -> None:
    """A guide page never sends users to a private name (``trio_agent._core._serde...``,
    ``_pairing``...): what they need is public, in the API reference."""
    text = page.read_text(encoding="utf-8")
    spans = re.findall(r"`([^`\n]+)`", text)
    private = [s for s in spans if re.search(r"(^|[.\s(])_[a-z]", s) and "/" not in s]
    assert private == []
