"""What the context-policy tests share: a tool whose every call returns 20 KB, and a
script of replies calling it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.kit.loop import call, reply, tool_use
from trio_agent import tool

if TYPE_CHECKING:
    from trio_agent import AssistantMessage

BIG = "0123456789" * 2000
"""A 20 KB tool output (about 5,000 tokens by the estimate)."""


@tool
async def read(path: str) -> str:
    """Read a file (20 KB each time)."""
    return BIG


def turns(n: int) -> list[AssistantMessage]:
    """``n`` replies each calling ``read`` (ids ``c0``...), then a final answer."""
    return [tool_use(call(f"c{i}", "read", path=f"f{i}")) for i in range(n)] + [reply("done")]
