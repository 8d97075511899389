"""The public surface is deliberate: ``__all__`` is sorted and names everything exported."""

from __future__ import annotations

import importlib
import types

import pytest

PUBLIC_MODULES = [
    "trio_agent",
    "trio_agent.testing",
    "trio_agent.providers",
    "trio_agent.tools",
    "trio_agent.replay",
    "trio_agent.mcp",
    "trio_agent.fleet",
    "trio_agent.telemetry",
    "trio_agent.report",
    "trio_agent.context",
    "trio_agent.rollout",
    "trio_agent.aio",
]


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_sorted_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    # dir() rather than vars(): a module may import a name on first access (PEP 562
    # ``__getattr__``/``__dir__``), as trio_agent.testing does for its strategies.
    exported = [
        n
        for n in dir(module)
        if not n.startswith("_")
        and not isinstance(getattr(module, n), types.ModuleType)
        and n != "annotations"
    ]
    assert module.__all__ == sorted(module.__all__)
    assert sorted(exported) == module.__all__
    for n in module.__all__:
        assert getattr(module, n) is not None


def test_core_names() -> None:
    import trio_agent

    for n in [
        "run_agent_loop",
        "open_agent_loop",
        "Context",
        "LoopConfig",
        "AgentRunResult",
        "Tool",
        "check_transcript",
        "dumps",
        "loads",
        "TranscriptFormatError",
        "AgentRunError",
    ]:
        assert n in trio_agent.__all__


@pytest.mark.parametrize(
    ("module", "names"),
    [
        (
            "trio_agent.testing",
            [
                "assistant_replies",
                "faults",
                "json_values",
                "messages",
                "scripts",
                "tool_arguments",
                "tool_calls",
                "transcripts",
            ],
        ),
        ("trio_agent.replay", ["faults"]),
    ],
)
def test_strategies_are_the_real_functions(module: str, names: list[str]) -> None:
    # help(trio_agent.testing.scripts) shows the real signature and docstring, not a
    # (*args, **kwargs) stand-in.
    import inspect

    from trio_agent.testing import _strategies

    kit = importlib.import_module(module)
    for name in names:
        real = getattr(_strategies, name)
        assert getattr(kit, name) is real
        assert "args" not in inspect.signature(getattr(kit, name)).parameters
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        getattr(kit, "nope")  # noqa: B009 - the missing name is the point


def test_help_opens_with_how_to_use_it() -> None:
    """``help(trio_agent)`` starts with what a user does — a working example and where to
    start — and only then maps the private modules."""
    import ast
    import textwrap

    import trio_agent

    doc = trio_agent.__doc__
    assert doc is not None
    usage, _, layout = doc.partition("\nInside,")
    assert layout, "no map of the private modules after the usage"
    assert "``_" not in usage, "the usage part names private modules"
    example = textwrap.dedent(usage.split("::\n", 1)[1].split("\nStart here", 1)[0])
    imported = [
        (node.module, alias.name)
        for node in ast.walk(ast.parse(example))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trio_agent")
        for alias in node.names
    ]
    assert ("trio_agent", "run_agent_loop") in imported
    for module, name in imported:
        assert name in importlib.import_module(module).__all__, (module, name)
    assert "run_agent_loop(" in example
