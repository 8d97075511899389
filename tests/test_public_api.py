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
    "trio_agent.telemetry",
]


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_sorted_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    exported = [
        n
        for n, value in vars(module).items()
        if not n.startswith("_") and not isinstance(value, types.ModuleType) and n != "annotations"
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
