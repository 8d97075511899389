"""Rollouts (and any trio code) from asyncio programs, through trio's guest mode.

RL frameworks are asyncio programs. This module runs trio-agent inside them without a
thread per call: the first call starts trio in guest mode on the running asyncio loop
(``asyncio`` or uvloop), and every call is one trio task there::

    import trio_agent.aio

    async def collect(model, tasks):           # asyncio code
        rollouts = await asyncio.gather(
            *(trio_agent.aio.rollout(t, model, TOOLS, reward=score) for t in tasks)
        )
        await trio_agent.aio.run(model.aclose)  # trio functions run the same way
        await trio_agent.aio.aclose()           # end the guest run before the loop ends
        return rollouts

Cancelling the asyncio task that awaits a call cancels its trio task and waits for its
clean-up (a run pairs its transcript) before ``CancelledError`` propagates. A model is
used from the loop it was first used on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..rollout import Rollout
from ..rollout import rollout as _rollout
from ._guest import aclose as aclose
from ._guest import run as run

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trio_agent import Message, Model, Tool

__all__ = ["aclose", "rollout", "run"]


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
