"""What the context-policy tests share: a tool whose every call returns 20 KB, a script
of replies calling it, and a fake provider refusing requests over a byte budget with the
provider's documented overflow error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.kit.http_server import error, sse
from tests.kit.loop import call, reply, tool_use
from tests.kit.providers import anthropic_reply, openai_reply
from trio_agent import tool

if TYPE_CHECKING:
    from tests.kit.http_server import Received, Responder
    from trio_agent import AssistantMessage

DATA = Path(__file__).resolve().parent.parent / "data" / "overflow"
BUDGET = 100_000
"""Bytes of request body the fake servers accept (:class:`Budgeted`)."""

BIG = "0123456789" * 2000
"""A 20 KB tool output (about 5,000 tokens by the estimate)."""


@tool
async def read(path: str) -> str:
    """Read a file (20 KB each time)."""
    return BIG


def turns(n: int) -> list[AssistantMessage]:
    """``n`` replies each calling ``read`` (ids ``c0``...), then a final answer."""
    return [tool_use(call(f"c{i}", "read", path=f"f{i}")) for i in range(n)] + [reply("done")]


def overflow_body(kind: str) -> Any:
    """The provider's documented overflow error body (a fixture)."""
    return json.loads((DATA / f"{kind}.json").read_text())


class Budgeted:
    """A server handler: refuses a request over ``budget`` bytes with the provider's
    overflow error (status 400); answers the others with a call of ``read`` for the
    first ``calls`` accepted requests, then with text."""

    def __init__(self, kind: str, *, calls: int = 0, budget: int = BUDGET) -> None:
        self.kind = kind
        self.calls = calls
        self.budget = budget
        self.accepted: list[int] = []
        self.refused: list[int] = []
        self.log: list[bool] = []  # per request: accepted?

    async def __call__(self, request: Received, r: Responder) -> None:
        size = len(request.body)
        ok = size <= self.budget
        self.log.append(ok)
        if not ok:
            self.refused.append(size)
            await error(400, overflow_body(self.kind))(request, r)
            return
        n = len(self.accepted)
        self.accepted.append(size)
        reply = openai_reply if self.kind == "openai" else anthropic_reply
        prefix = "call_" if self.kind == "openai" else "toolu_"
        calls = [(f"{prefix}{n}", "read", {"path": f"f{n}.txt"})] if n < self.calls else []
        # Usage as a real server reports it (about 4 bytes a token), not the kit's 50.
        body = reply(f"step {n}", calls).replace('_tokens": 50', f'_tokens": {size // 4}')
        await sse(body)(request, r)
