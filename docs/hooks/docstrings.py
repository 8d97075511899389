"""The API reference documents every public name, or the build fails.

mkdocstrings renders what has a docstring and says nothing about what has none, so this
hook (listed under ``hooks:`` in ``mkdocs.yml``) checks before each build: for every
module an API page renders (a ``::: module`` line in ``docs/api/*.md``), each name of its
``__all__`` has a docstring; for each public class among them, so has each public method
and property, and each public attribute has a docstring of its own or an entry in the
``Attributes:`` (or, for a field its constructor sets from the argument of the same name,
``Args:``) section of a public class that has it (the class itself, or a public base
class). Each gap is a warning, which ``strict: true`` turns into a failed build.

``tests/test_docs.py`` runs the same check, so a gap also fails the tests.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import griffe

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

ROOT = Path(__file__).resolve().parents[2]
RENDERED = re.compile(r"^::: ([\w.]+)\s*$", re.M)


def rendered_modules(api_dir: Path = ROOT / "docs" / "api") -> list[str]:
    """The modules the API pages render, in file order."""
    found: list[str] = []
    for page in sorted(api_dir.glob("*.md")):
        found += RENDERED.findall(page.read_text(encoding="utf-8"))
    return found


def undocumented(modules: Iterable[str], search_path: Path = ROOT / "src") -> list[str]:
    """Every public name of ``modules`` (and member of a public class) without a docstring.

    Args:
        modules: dotted names of modules, all in one top-level package.
        search_path: the folder that package is loaded from (statically: nothing runs).

    Returns:
        One dotted path per gap, in order (empty when everything is documented).
    """
    modules = list(modules)
    package = modules[0].split(".")[0]
    loader = griffe.GriffeLoader(
        search_paths=[str(search_path)], docstring_parser=griffe.Parser.google
    )
    loader.load(package)
    loader.resolve_aliases(implicit=False, external=False)
    collection = loader.modules_collection
    public: dict[str, str] = {}  # where each public object is defined -> its public path
    exported: list[tuple[str, Any]] = []
    for name in modules:
        module = collection[name]
        for export in module.exports or ():
            target = _target(module[str(export)])
            exported.append((f"{name}.{export}", target))
            public.setdefault(target.path, f"{name}.{export}")
    gaps: list[str] = []
    for path, obj in exported:
        if not _docstring(obj):
            gaps.append(path)
        if obj.is_class:
            gaps += (f"{path}.{m}" for m in _undocumented_members(obj, public))
    return gaps


def _target(obj: Any) -> Any:
    return obj.final_target if obj.is_alias else obj


def _docstring(obj: Any) -> str:
    return obj.docstring.value.strip() if obj.docstring else ""


_LISTING = (griffe.DocstringSectionKind.attributes, griffe.DocstringSectionKind.parameters)


def _listed_attributes(cls: Any) -> set[str]:
    """The names in the ``Attributes:`` and ``Args:`` sections of the class's docstring."""
    if not cls.docstring:
        return set()
    return {
        entry.name.lstrip("*")
        for section in cls.docstring.parsed
        if section.kind in _LISTING
        for entry in section.value
    }


def _public_lineage(cls: Any, public: dict[str, str]) -> Iterator[Any]:
    """The class and those of its (resolved) base classes that are public themselves."""
    yield cls
    for base in cls.mro():
        if base.path in public:
            yield base


def _undocumented_members(cls: Any, public: dict[str, str]) -> Iterator[str]:
    listed = set().union(*(_listed_attributes(c) for c in _public_lineage(cls, public)))
    for name, member in cls.all_members.items():
        if name.startswith("_"):
            continue
        try:
            member = _target(member)
        except griffe.AliasResolutionError:  # inherited from outside the package
            continue
        if member.is_attribute and name in listed:
            continue
        if member.is_class and member.path in public:
            continue  # a public class on its own page of the reference
        if not _docstring(member):
            yield name


def on_pre_build(config: Any) -> None:
    """mkdocs hook: one warning per undocumented public name (``strict`` fails on it)."""
    from mkdocs.plugins import get_plugin_logger

    log = get_plugin_logger("docstrings")
    for path in undocumented(rendered_modules()):
        log.warning("public name without a docstring: %s", path)
