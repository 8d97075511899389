"""Scripts: a whole scenario for one run of the loop, as one readable value.

:class:`Script` is the scenario (plain data: the replies, what each call does, what
happens around the run; its fields are in ``_script_values``) with the two methods that
use it:
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
    """A whole scenario for one run of the loop, as plain data, plus ``build()`` and
    ``run()``.

    It says what the model replies, what each tool call does, and what happens around
    the run (queued messages, an abort, interrupts, a deadline, a failing hook, the
    ``LoopConfig`` limits). Build it by hand or draw it with the ``scripts()`` strategy.
    Compared by value (two equal scripts describe the same run); ``repr`` is
    ``describe()``, the scenario in readable lines.

    Raises ``ValueError`` when built with two tools of one name (or one named ``work``
    or ``serial``, the scripted tools), or with the ``callback`` driver and an abort,
    interrupts or a deadline.

    Attributes:
        replies: the model's replies, in request order; when they run out the model
            answers with an error.
        prompt: the prompt's text; ``None`` continues from ``history``.
        history: the caller's context messages (paired; they must end in a user,
            tool-result or custom message when ``prompt`` is None).
        max_steps: ``LoopConfig.max_steps``.
        tool_timeout: ``LoopConfig.tool_timeout``.
        tool_execution: ``LoopConfig.tool_execution``.
        max_concurrency: ``LoopConfig.max_concurrency``.
        continue_after_length: ``LoopConfig.continue_after_length``.
        max_output_tokens: ``LoopConfig.max_output_tokens`` (each reply reports 10
            output tokens).
        run_timeout: ``LoopConfig.run_timeout`` (virtual seconds after the start).
        arrivals: steering and follow-up messages queued during the run.
        steering_mode: how many steering messages one poll takes (``one_at_a_time``
            or ``all``).
        follow_up_mode: the same for follow-up messages.
        abort: when the run is aborted, if it is.
        interrupts: when the running batch or reply is interrupted (the run goes on).
        deadline: an outer cancel scope's deadline, virtual seconds after the start.
        stop_after_turn: ``should_stop_after_turn`` answers True on its call number
            ``stop_after_turn`` (0-based; the run then ends ``stopped``); None installs
            no such hook.
        hook_failure: a run-level hook that raises.
        chunk_size: text is streamed in deltas of this many characters (None: one
            delta per block).
        driver: ``channel`` (``open_agent_loop``, a consumer task) or ``callback``
            (``run_agent_loop`` with a plain ``on_event``; no abort, no deadline).
        tools: the user's own tools, offered to the model beside the scripted ones
            (names must differ from ``work`` and ``serial``); calls to them carry
            ``CallScript.args`` and run the tools' real bodies.
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
