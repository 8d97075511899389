"""The package is layered: a module imports only from its own layer or the layers below.

Every ``import`` of every module under ``src/trio_agent`` is read with :mod:`ast` —
those under ``if TYPE_CHECKING:`` and those inside functions included, since a type-level
or lazy import is still a dependency a reader has to follow. Each module maps to one layer
of :data:`LAYERS`; an import of a module in a higher layer fails the test, and so does any
import cycle between modules (within a layer too).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "trio_agent"

# Lowest first. A module may import from its own layer (without a cycle) and from any
# layer listed before it. The keys are module names relative to ``trio_agent``; a package
# name stands for every module in it. ``trio_agent/__init__.py`` is the public facade of
# the core: it sits above the core layers and below the edges that re-use it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "values",
        (
            "_core",
            "_core._util",
            "_core._errors",
            "_core._messages",
            "_core._events",
            "_core._serde",
            "_core._model",
            "_core._observer",
            "_core._tools",
            "_core._config",
        ),
    ),
    (
        "rules",
        (
            "_core._arguments",
            "_core._conversion",
            "_core._tool_decorator",
            "_core._turn",
            "_core._blocks",
            "_core._call_ids",
        ),
    ),
    (
        "loop",
        (
            "_run",
            "_run._stream",
            "_run._batch",
            "_run._delivery",
            "_run._runner",
            "_run._loop",
        ),
    ),
    (
        "agent",
        ("_run._queues", "_agent", "_agent._state", "_agent._run", "_agent._agent"),
    ),
    ("disk", ("_core._pairing", "_store", "_store._locked_file", "_store._jsonl")),
    ("facade", ("__init__",)),
    ("edges", ("providers", "tools", "mcp", "replay", "telemetry")),
    ("test kit", ("testing",)),
    # Fleets of runs; its demo tasks use the test kit's ScriptedModel.
    ("fleet", ("fleet",)),
    # The benchmark workloads `trio-agent bench` runs (scripted with the test kit).
    ("benchmark suite", ("_bench",)),
    # What the commands are built from: shared helpers, rendering, the demo's script, and
    # the chat command's options and conversation. None of them imports a command.
    (
        "command line parts",
        (
            "cli._common",
            "cli._render",
            "cli._demo_script",
            "cli._chat_options",
            "cli._chat_session",
        ),
    ),
    ("command line", ("cli",)),
    # ``python -m trio_agent``: the command line again.
    ("entry point", ("__main__",)),
)

LAYER_OF: dict[str, int] = {
    name: index for index, (_, names) in enumerate(LAYERS) for name in names
}


def module_name(path: Path, src: Path) -> str:
    """``trio_agent/tools/_files.py`` -> ``tools._files``; a package's ``__init__`` is
    named by its package (the root package is ``__init__``)."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or "__init__"


def layer_of(module: str) -> int:
    head = module.split(".")[0]
    if module in LAYER_OF:
        return LAYER_OF[module]
    if head in LAYER_OF:
        return LAYER_OF[head]
    raise AssertionError(
        f"module {module!r} has no layer: add it to LAYERS in tests/test_layering.py"
    )


def imports_of(path: Path, src: Path, modules: set[str]) -> set[str]:
    """The ``trio_agent`` modules ``path`` imports (relative to ``trio_agent``)."""
    me = module_name(path, src)
    is_package = path.name == "__init__.py"
    if me == "__init__":
        package: list[str] = []
    elif is_package:
        package = me.split(".")
    else:
        package = me.split(".")[:-1]
    found: set[str] = set()

    def add(target: str, names: list[str]) -> None:
        # ``from . import _events`` imports the module ``_events``; ``from .x import y``
        # imports ``x`` (or its submodule ``x.y`` when there is one).
        for name in names:
            sub = f"{target}.{name}" if target else name
            if sub in modules:
                found.add(sub)
            else:
                found.add(target or "__init__")

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package):
                    raise AssertionError(f"{me}: relative import above the package")
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module == "trio_agent" or (node.module or "").startswith("trio_agent."):
                target = node.module.removeprefix("trio_agent").removeprefix(".")  # type: ignore[union-attr]
            else:
                continue
            add(target, [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "trio_agent":
                    found.add("__init__")
                elif alias.name.startswith("trio_agent."):
                    found.add(alias.name.removeprefix("trio_agent."))
    found.discard(me)
    return found


def import_graph(src: Path) -> dict[str, set[str]]:
    paths = sorted(src.rglob("*.py"))
    modules = {module_name(p, src) for p in paths}
    return {module_name(p, src): imports_of(p, src, modules) for p in paths}


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module, targets in sorted(graph.items()):
        mine = layer_of(module)
        for target in sorted(targets):
            theirs = layer_of(target)
            if theirs > mine:
                out.append(f"{module} ({LAYERS[mine][0]}) imports {target} ({LAYERS[theirs][0]})")
    return out


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_every_module_has_a_layer() -> None:
    graph = import_graph(SRC)
    assert {"__init__", "_run._runner", "_run._batch", "cli", "testing"} <= set(graph)
    for module in graph:
        layer_of(module)


def test_no_module_imports_from_a_layer_above() -> None:
    assert layering_violations(import_graph(SRC)) == []


def test_no_import_cycle() -> None:
    assert import_cycles(import_graph(SRC)) == []


def test_the_check_sees_type_checking_and_function_level_imports(tmp_path: Path) -> None:
    # A miniature tree with one violation of each kind the check must catch.
    pkg = tmp_path / "trio_agent"
    for folder in ("cli", "_core", "_run"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from ._core._errors import E\n")
    (pkg / "_core" / "_errors.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .._run._loop import R\n"
    )
    (pkg / "_run" / "_loop.py").write_text("from .._core._errors import E\n")
    (pkg / "_core" / "_messages.py").write_text("def f():\n    from ..cli import main\n")
    (pkg / "cli" / "__init__.py").write_text("from .._core import _messages\n")
    graph = import_graph(pkg)
    assert graph["_core._errors"] == {"_run._loop"}
    assert graph["_core._messages"] == {"cli"}
    assert graph["cli"] == {"_core._messages"}
    assert layering_violations(graph) == [
        "_core._errors (values) imports _run._loop (loop)",
        "_core._messages (values) imports cli (command line)",
    ]
    assert import_cycles(graph) == [
        ["_core._errors", "_run._loop"],
        ["_core._messages", "cli"],
    ]


@pytest.mark.parametrize(
    "module", ["_run._runner", "_agent._state", "_agent._run", "_agent._agent"]
)
def test_the_core_stays_in_its_layers(module: str) -> None:
    # The loop and the Agent never reach up to the edges or the command line.
    graph = import_graph(SRC)
    assert all(layer_of(t) <= layer_of(module) for t in graph[module])
