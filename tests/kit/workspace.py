"""The workspace tools called directly, outside a run, as their tests do."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trio_agent import ToolCall, ToolContext, ToolOutput

if TYPE_CHECKING:
    from trio_agent import Tool


async def run(tools: dict[str, Tool], name: str, **args: Any) -> ToolOutput:
    """Call tool ``name`` of ``tools`` once with ``args`` (call id ``c1``), ignoring its
    progress; returns its output, which must be a ``ToolOutput``."""
    call = ToolCall(id="c1", name=name, arguments=args)

    async def report(partial: object) -> None:
        pass

    out = await tools[name].execute(call, args, ToolContext(call=call, report=report))
    assert isinstance(out, ToolOutput)
    return out
