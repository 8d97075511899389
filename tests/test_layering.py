"""The package is layered, and the layers are its folders.

Every ``import`` of every module under ``src/trio_agent`` is read with :mod:`ast` —
those under ``if TYPE_CHECKING:`` and those inside functions included, since a type-level
or lazy import is still a dependency a reader has to follow. Each module belongs to one
part of :data:`PARTS` (its top-level folder, or the facade ``__init__``). The test fails
when a part imports a part it may not (:data:`MAY_IMPORT`), when it reaches a private
module of another part instead of its package (``from .._core import Message``, never
``from .._core._messages import Message``), when ``_core`` imports trio, or on any import
cycle between modules (within a part too).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "trio_agent"

# The four layers and the facade. ``_core`` holds values and rules and imports no trio;
# ``_run`` is the trio driver; ``_agent`` the stateful Agent; ``_store`` files on disk.
CORE = "_core"
LAYERS: frozenset[str] = frozenset({"_core", "_run", "_agent", "_store", "__init__"})

# What each part may import besides itself. A part not listed here has no place yet.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "_core": frozenset(),
    "_run": frozenset({"_core"}),
    "_agent": frozenset({"_core", "_run"}),
    "_store": frozenset({"_core"}),
    # The public facade re-exports the layers.
    "__init__": frozenset({"_core", "_run", "_agent", "_store"}),
    # The edges: the facade and the layers, no other edge.
    "providers": LAYERS,
    "tools": LAYERS,
    "mcp": LAYERS,
    "telemetry": LAYERS,
    "replay": LAYERS,
    # Context policies (token accounting, compaction).
    "context": LAYERS,
    # The test kit injects the replay edge's faults.
    "testing": LAYERS | {"replay"},
    # Fleets of runs; the demo's tasks are scripted with the test kit's ScriptedModel.
    "fleet": LAYERS | {"testing"},
    # The benchmark workloads `trio-agent bench` runs, scripted with the test kit; one
    # of them times the telemetry edge.
    "_bench": LAYERS | {"testing", "telemetry", "context"},
    # HTML reports of transcripts, fleet folders (read as the fleet reads its results)
    # and benchmark results.
    "report": LAYERS | {"fleet"},
    # Rollouts for training: trajectories from transcripts, runs with rewards, fleets.
    "rollout": LAYERS | {"fleet", "providers"},
    # The asyncio bridge (trio guest mode) runs rollouts.
    "aio": LAYERS | {"rollout"},
    # The command line: every part (its demo is scripted with the test kit).
    "cli": LAYERS
    | {
        "providers",
        "tools",
        "mcp",
        "telemetry",
        "replay",
        "testing",
        "fleet",
        "_bench",
        "report",
        "context",
    },
    # ``python -m trio_agent``: the command line again.
    "__main__": frozenset({"cli"}),
}
PARTS: tuple[str, ...] = tuple(MAY_IMPORT)

# The private modules of another part a module may still reach, each with its reason.
PRIVATE_EXCEPTIONS: dict[tuple[str, str], str] = {
    # `trio-agent fleet` checks --factory with the resolver the fleet's workers use.
    ("cli.fleet", "fleet._worker"): "one resolver of --factory for the command and workers",
    # --ray fails in one line when Ray is missing, with the fleet's own import of it.
    ("cli.fleet", "fleet._ray"): "one import of Ray, one message when it is missing",
}


def part_of(module: str) -> str:
    """The part ``module`` (relative to ``trio_agent``) belongs to."""
    head = module.split(".")[0]
    if head not in MAY_IMPORT:
        raise AssertionError(
            f"module {module!r} has no part: add it to MAY_IMPORT in tests/test_layering.py"
        )
    return head


def is_private_of_another_part(module: str, target: str) -> bool:
    """Whether ``target`` is a module inside another part (not its package) with a
    private name on the way, such as ``_core._messages`` or ``fleet._worker``."""
    if part_of(target) == part_of(module):
        return False
    return any(name.startswith("_") for name in target.split(".")[1:])


def module_name(path: Path, src: Path) -> str:
    """``trio_agent/tools/_files.py`` -> ``tools._files``; a package's ``__init__`` is
    named by its package (the root package is ``__init__``)."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or "__init__"


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
    """Every import of a part a module may not import, and every reach into a private
    module of another part (bar :data:`PRIVATE_EXCEPTIONS`)."""
    out = []
    for module, targets in sorted(graph.items()):
        mine = part_of(module)
        for target in sorted(targets):
            theirs = part_of(target)
            if theirs != mine and theirs not in MAY_IMPORT[mine]:
                out.append(f"{module} ({mine}) imports {target} ({theirs})")
            elif (
                is_private_of_another_part(module, target)
                and (module, target) not in PRIVATE_EXCEPTIONS
            ):
                out.append(f"{module} reaches the private module {target}")
    return out


def trio_imports(src: Path) -> list[str]:
    """The modules under ``_core`` that import trio (at any level of the file)."""
    out = []
    for path in sorted((src / CORE).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            if any(name == "trio" or name.startswith("trio.") for name in names):
                out.append(module_name(path, src))
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


def test_every_module_has_a_part() -> None:
    graph = import_graph(SRC)
    assert {"__init__", "_run._runner", "_run._batch", "_core._inputs", "cli", "testing"} <= set(
        graph
    )
    for module in graph:
        part_of(module)


def test_no_module_imports_what_its_part_may_not() -> None:
    assert layering_violations(import_graph(SRC)) == []


def test_the_core_imports_no_trio() -> None:
    assert trio_imports(SRC) == []


def test_no_import_cycle() -> None:
    assert import_cycles(import_graph(SRC)) == []


def test_every_exception_is_still_used() -> None:
    graph = import_graph(SRC)
    for module, target in PRIVATE_EXCEPTIONS:
        assert target in graph[module], (module, target)


def test_the_check_sees_type_checking_and_function_level_imports(tmp_path: Path) -> None:
    # A miniature tree with one violation of each kind the check must catch.
    pkg = tmp_path / "trio_agent"
    for folder in ("cli", "_core", "_run", "tools", "mcp"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from ._core import E\n")
    (pkg / "_core" / "_errors.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .._run._loop import R\n"
    )
    (pkg / "_run" / "_loop.py").write_text("from .._core._errors import E\n")
    (pkg / "_core" / "_messages.py").write_text("def f():\n    from ..cli import main\n")
    (pkg / "_core" / "_model.py").write_text("def f():\n    import trio\n")
    (pkg / "cli" / "__init__.py").write_text("from .._core import _messages\n")
    (pkg / "mcp" / "_servers.py").write_text("from ..tools import bash_tool\n")
    (pkg / "tools" / "_bash.py").write_text("from trio_agent.mcp._servers import S\n")
    graph = import_graph(pkg)
    assert graph["_core._errors"] == {"_run._loop"}
    assert graph["_core._messages"] == {"cli"}
    assert graph["cli"] == {"_core._messages"}
    assert layering_violations(graph) == [
        "_core._errors (_core) imports _run._loop (_run)",
        "_core._messages (_core) imports cli (cli)",
        "_run._loop reaches the private module _core._errors",
        "cli reaches the private module _core._messages",
        "mcp._servers (mcp) imports tools (tools)",
        "tools._bash (tools) imports mcp._servers (mcp)",
    ]
    assert trio_imports(pkg) == ["_core._model"]
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
    assert all(part_of(t) in LAYERS for t in graph[module])
