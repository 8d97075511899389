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

from .. import _events as ev
from .._config import Context
from .._errors import AgentRunError
from .._loop import AgentRunResult
from .._messages import AssistantMessage, CustomMessage, Message
from .._model import ModelRequest
from ._invariants import run_invariant_violations
from ._script_values import SERIAL_TOOL, QueueName, Scenario, seconds

__all__ = ["ScriptRun"]


@final
@attrs.frozen(kw_only=True, repr=False)
class ScriptRun:
    """What one run of a script did. ``check()`` asserts every run invariant
    (those of :func:`assert_run_invariants`, and no task left alive)."""

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
        # 5: a sequential batch finalizes each call before the next: a call that settled
        # (not stopped by an abort or interrupt) has its result message right after.
        out.extend(self._sequential_order())
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

    def _sequential_order(self) -> list[str]:
        out: list[str] = []
        events = self.events
        sequential = self.script.tool_execution == "sequential"
        one_at_a_time = {SERIAL_TOOL} | {
            t.name for t in self.script.tools if t.execution_mode == "sequential"
        }
        for i, e in enumerate(events):
            if isinstance(e, ev.MessageEnd) and type(e.message) is AssistantMessage:
                calls = e.message.tool_calls
                sequential = self.script.tool_execution == "sequential" or any(
                    c.name in one_at_a_time for c in calls
                )
            elif (
                sequential
                and isinstance(e, ev.ToolExecutionEnd)
                and e.outcome not in ("aborted", "skipped")
            ):
                after = events[i + 1 : i + 3]
                if [type(x) for x in after] != [ev.MessageStart, ev.MessageEnd] or any(
                    x.message is not e.result  # type: ignore[union-attr]
                    for x in after
                ):
                    out.append(
                        f"[5 call events] event {i}: call {e.call_id!r} of a sequential "
                        "batch: its result message does not follow its ToolExecutionEnd"
                    )
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
