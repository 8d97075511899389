"""Scripts: a whole scenario for one run of the loop, as one readable value.

:class:`Script` is the :class:`~._script_values.Scenario` (plain data: the replies, what
each call does, what happens around the run) with the two methods that use it:
``script.build()`` makes the :class:`ScriptRig` — the ``ScriptedModel``, the tools, the
``Context``, the ``LoopConfig`` and the queues — and ``await script.run()`` (the same as
``await script.build().run()``) drives one real run under the current trio clock (use an
autojump clock: latencies are virtual seconds) and returns a :class:`ScriptRun` holding
everything the invariants need; ``ScriptRun.check()`` asserts them all.

The values, the result and the driver live in ``_script_values``, ``_script_run`` and
``_script_rig``; the methods are here, one layer above all three, so that the values
never import the driver that consumes them.

Nothing here imports Hypothesis; the strategies that generate scripts live in
``_strategies``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import attrs

from ._script_rig import ScriptRig
from ._script_values import Scenario

if TYPE_CHECKING:
    from ._script_run import ScriptRun

__all__ = ["Script"]


@final
@attrs.frozen(kw_only=True, repr=False)
class Script(Scenario):
    """A whole scenario for one run: every field of :class:`Scenario` (its attributes
    are listed there), plus ``build()`` and ``run()``.

    Compared by value (two equal scripts describe the same run); ``repr`` is
    :meth:`describe`, the scenario in readable lines.
    """

    def build(self) -> ScriptRig:
        """The model, tools, context, config and queues for one run of this script.

        Not a checkpoint; builds fresh objects every call (a rig runs once).
        """
        return ScriptRig(self)

    async def run(self) -> ScriptRun:
        """Build a rig and drive one run; see :meth:`ScriptRig.run` (a checkpoint;
        a cancel of the caller cancels the run, and nothing of it outlives the call)."""
        return await self.build().run()
