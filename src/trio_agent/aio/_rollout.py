"""``rollout`` awaited from asyncio."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..rollout import rollout as _rollout
from ._guest import run

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trio_agent import Message, Model, Tool

    from ..rollout import Rollout

__all__ = ["rollout"]


async def rollout(
    task: str | Sequence[Message], model: Model, tools: Sequence[Tool] = (), **kwargs: Any
) -> Rollout:
    """``trio_agent.rollout.rollout(task, model, tools, **kwargs)``, awaited from asyncio.

    Takes the same arguments and returns the same :class:`~trio_agent.rollout.Rollout`
    (``on_event`` and ``reward`` are called in the trio task: they may be plain functions
    or trio coroutine functions, not asyncio ones). Cancelling the awaiting task cancels
    the run; its transcript is paired before ``asyncio.CancelledError`` propagates.
    """
    return await run(lambda: _rollout(task, model, tools, **kwargs))
