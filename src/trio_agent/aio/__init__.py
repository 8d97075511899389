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

from ._guest import aclose as aclose
from ._guest import run as run
from ._rollout import rollout as rollout

__all__ = ["aclose", "rollout", "run"]
