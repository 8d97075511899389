"""Scripts, the result: what one run of a script did, and the checks on it.

:class:`ScriptRun` is what ``await script.run()`` returns — the events, the requests the
model received, the queues, the tasks left alive — and ``check()`` asserts every run
invariant on it (those of :func:`~trio_agent.testing.assert_run_invariants`, and the ones
only a scripted run can see: no task outlives the run, every tool's ``finally`` ran,
queues lose nothing). It is plain data; the driver that fills it is ``_script_rig``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import final

import attrs

from .._core import AgentRunError, AgentRunResult, Context, CustomMessage, Message, ModelRequest
from .._core import events as ev
from ._invariants import run_invariant_violations
from ._script_values import QueueName, Scenario, seconds

__all__ = ["ScriptRun"]


@final
@attrs.frozen(kw_only=True, repr=False)
class ScriptRun:
    """What one run of a script did. ``check()`` asserts every run invariant
    (those of :func:`assert_run_invariants`, and no task left alive).

    Attributes:
        script: the script that ran.
        result: the run's result (also when it raised ``AgentRunError`` or was
            cancelled from outside).
        error: the ``AgentRunError`` the run raised, or None.
        events: every event the consumer received, in order.
        requests: every request the model received, in order.
        prompts: the prompts the run was given.
        context: the ``Context`` the run was given.
        context_before: a copy of it made before the run, to check it was not changed.
        polled: every message a steering or follow-up poll returned, in order.
        arrived: per queue (``steer``, ``follow_up``), the messages queued during the run.
        taken: per queue, the messages polls took.
        still_queued: per queue, the messages left in it when the run ended.
        requests_at_abort: how many requests the model had received when the abort
            fell; None without an abort.
        outer_cancelled: whether the script's outer deadline cancelled the run.
        leaked_tasks: the names of tasks started during the run and still alive after
            it (empty when the run cleaned up).
        unfinished_tools: the calls that entered a tool and never left it (empty when
            every cancelled tool unwound).
        open_streams: model streams left open (0 when the loop closed every one).
    """

    script: Scenario
    result: AgentRunResult
    error: AgentRunError | None
    events: tuple[ev.AgentEvent, ...]
    event_times: tuple[float, ...]
    """When each event reached the consumer, in virtual seconds after the start."""
    requests: tuple[ModelRequest, ...]
    request_times: tuple[float, ...]
    """When each request came, in virtual seconds after the start."""
    prompts: tuple[Message, ...]
    context: Context
    context_before: Context
    polled: tuple[Message, ...]
    arrived: Mapping[QueueName, tuple[Message, ...]]
    taken: Mapping[QueueName, tuple[Message, ...]]
    still_queued: Mapping[QueueName, tuple[Message, ...]]
    requests_at_abort: int | None
    outer_cancelled: bool
    leaked_tasks: tuple[str, ...]
    unfinished_tools: tuple[str, ...]
    open_streams: int
    hook_failed: bool = False
    """The script's failing hook did raise (the run must then end ``error``)."""
    interrupted: int = 0
    """How many ``run.interrupt()`` calls found something to interrupt."""

    def __repr__(self) -> str:
        return (
            f"<ScriptRun reason={self.result.reason!r} steps={self.result.steps} "
            f"events={len(self.events)}>"
        )

    def violations(self) -> list[str]:
        """Every broken invariant, as readable lines (empty when all hold)."""
        out = run_invariant_violations(
            self.result,
            self.events,
            self.requests,
            self.context_before,
            context=self.context,
            prompts=self.prompts,
            polled=self.polled,
            max_steps=self.script.max_steps,
            requests_at_abort=self.requests_at_abort,
            tool_execution=self.script.tool_execution,
        )
        if self.hook_failed:
            # A failing hook ends the run with AgentRunError (unless an outer cancel
            # took precedence: then Cancelled propagates and the result says error).
            if self.result.reason != "error":
                out.append(f"[2 events] a hook raised but the run ended {self.result.reason!r}")
            if self.error is None and not self.outer_cancelled:
                out.append("[2 events] a hook raised but no AgentRunError was raised")
            elif self.error is not None and not isinstance(self.error.__cause__, RuntimeError):
                out.append(f"[2 events] AgentRunError without the hook's error: {self.error!r}")
        elif self.error is not None:
            out.append(f"[2 events] the run raised AgentRunError: {self.error}")
        # 1: each request is the transcript as it stood (custom messages left out).
        sent = [m for m in self.result.transcript if type(m) is not CustomMessage]
        for i, request in enumerate(self.requests):
            if list(request.messages) != sent[: len(request.messages)]:
                out.append(f"[1 pairing] request {i} is not a prefix of the final transcript")
        # 4: an outer deadline stops requests as an abort does.
        if self.script.deadline is not None:
            late = [t for t in self.request_times if t >= self.script.deadline]
            if late:
                out.append(
                    f"[4 steps] {len(late)} request(s) at or after the deadline "
                    f"t={seconds(self.script.deadline)}"
                )
        # 4: so does the run's own run_timeout, which alone ends a run "timeout".
        timeout = self.script.run_timeout
        if timeout is not None:
            late = [t for t in self.request_times if t >= timeout]
            if late:
                out.append(
                    f"[4 steps] {len(late)} request(s) at or after the run_timeout "
                    f"t={seconds(timeout)}"
                )
        if self.result.reason == "timeout" and (
            # (virtual times are float differences: a hair of rounding is allowed)
            timeout is None or (self.events and self.event_times[-1] < timeout - 1e-9)
        ):
            out.append("[2 events] the run ended 'timeout' before its run_timeout")
        # 6: each queue is FIFO: taken, then still queued, is what arrived.
        for q in ("steer", "follow_up"):
            if (*self.taken[q], *self.still_queued[q]) != self.arrived[q]:
                out.append(f"[6 queues] the {q} queue lost or reordered messages")
        # 7: nothing of the run outlives it.
        if self.leaked_tasks:
            out.append(f"[7 tasks] still alive after the run: {list(self.leaked_tasks)}")
        if self.unfinished_tools:
            out.append(
                f"[7 tasks] tool calls whose finally block never ran: {list(self.unfinished_tools)}"
            )
        if self.open_streams:
            out.append(f"[7 tasks] {self.open_streams} model stream(s) still open")
        return out

    def check(self) -> None:
        """Raise ``AssertionError`` listing every broken invariant, with the scenario."""
        problems = self.violations()
        if problems:
            lines = "\n".join(f"  - {p}" for p in problems)
            raise AssertionError(
                f"{len(problems)} run invariant(s) broken (reason={self.result.reason!r}, "
                f"steps={self.result.steps}):\n{lines}\n{self.script.describe()}"
            )
