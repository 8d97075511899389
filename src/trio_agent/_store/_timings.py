"""Timing marker lines: when each model request and each tool call of a run happened.

A :class:`JsonlTranscript` made with ``timings=True`` hands the run's events to a
:class:`TimingRecorder`, which turns them into marker lines of kind ``"timings"``. Two
shapes, told apart by their keys; every time is in seconds from the run's start on the
trio clock (monotonic), and ``run`` is the wall-clock time of that start (seconds since
the epoch, the one anchor that places the run in real time and tells the runs of one
file apart)::

    {"marker": "timings", "data": {"run": 1764779745.25, "turn": 0,
        "request": {"start": 0.0012, "first_token": 0.41, "end": 1.93}}}
    {"marker": "timings", "data": {"run": 1764779745.25, "turn": 0,
        "calls": [{"id": "c1", "name": "read", "start": 1.94, "end": 2.01,
                   "outcome": "ok", "is_error": false, "waited": 0.0}, ...],
        "stats": {"wall_time": 0.08, "critical_path": 0.07, "total_call_time": 0.12,
                  "peak_concurrency": 2, "waited_on_limit": 0.0}}}

A request line is written with its reply, in the same write, right after it: the reply
is the message just before the marker (``messages[marker.at - 1]``). ``start`` is when
the turn opened (its request is shaped and sent right after), ``first_token`` when the
first streamed delta arrived (None when none did), ``end`` when the reply was finished.

A batch line is written when the turn ends (``TurnEnd``), or when the run ends if the
turn never did; its calls are matched to the transcript by id. A call that ran has the
start and end the batch measured (``TurnStats.calls``: after any wait for a
``max_concurrency`` slot); a call stopped before it ran (refused, skipped, aborted) has
the times of its ``ToolExecutionStart`` and ``ToolExecutionEnd``. ``stats`` is the
batch's own statistics (``TurnStats``) as the run computed them.

A crash loses at most the timings of the batch in progress: every line is written as
the run goes.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from .._core import AssistantMessage
from .._core import events as ev

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["TIMINGS", "TimingRecorder"]

TIMINGS: Final = "timings"
"""The kind of the timing marker lines."""


_TOKENS: Final = frozenset({ev.TextDelta, ev.ThinkingDelta, ev.ToolCallStart, ev.ToolCallDelta})
"""The streamed events that carry (or, for a call, announce) the reply's content."""


def _offset(value: float, origin: float) -> float | None:
    return None if math.isnan(value) else round(value - origin, 6)


@attrs.define(eq=False)
class TimingRecorder:
    """Turns a run's events into the data of its timing marker lines (see the module).

    It never awaits and never writes: the transcript asks it for a marker's data when a
    reply ends (:meth:`reply_ended`) and when a turn or the run ends
    (:meth:`batch_ended`), and writes what it gets.
    """

    _run: float = math.nan  # the wall clock at the run's start
    _origin: float = math.nan  # the trio clock at the run's start
    _turn: int = 0
    _request_start: float = math.nan
    _first_token: float = math.nan
    _calls: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    awaiting_first: bool = attrs.field(default=False, init=False)
    """True while a reply streams and its first token has not come (the one streamed
    event that matters: every other costs the transcript one attribute check)."""

    def first_token(self, event: ev.AssistantEvent) -> None:
        """A streamed event of the reply arrived now: the first token when it is the
        first text, thinking or tool-call content (a block's start is not)."""
        if type(event) in _TOKENS:
            self._first_token = trio.current_time()
            self.awaiting_first = False

    def _now(self) -> float:
        now = trio.current_time()
        if math.isnan(self._origin):  # events seen from the middle of a run
            self._start_run(now)
        return now

    def _start_run(self, now: float) -> None:
        self._origin = now
        self._run = round(time.time(), 6)
        self._turn = 0
        self._calls.clear()

    def see(self, event: ev.AgentEvent) -> None:
        """Note the time of ``event`` (any event but ``MessageEnd``, ``TurnEnd`` and
        ``AgentEnd``, which the methods below take)."""
        kind = type(event)
        if kind is ev.AgentStart:
            self._start_run(trio.current_time())
        elif kind is ev.TurnStart:
            assert isinstance(event, ev.TurnStart)
            self._request_start = self._now()
            self._turn = event.index
        elif kind is ev.MessageStart:
            assert isinstance(event, ev.MessageStart)
            if type(event.message) is AssistantMessage:
                now = self._now()
                if math.isnan(self._request_start):
                    self._request_start = now
                self.awaiting_first = True
                self._first_token = math.nan
        elif kind is ev.ToolExecutionStart:
            assert isinstance(event, ev.ToolExecutionStart)
            self._calls[event.call_id] = {
                "id": event.call_id,
                "name": event.tool_name,
                "start": self._now(),
                "end": math.nan,
                "outcome": None,
                "is_error": False,
                "waited": 0.0,
            }
        elif kind is ev.ToolExecutionEnd:
            assert isinstance(event, ev.ToolExecutionEnd)
            call = self._calls.get(event.call_id)
            if call is not None:
                call.update(end=self._now(), outcome=event.outcome, is_error=event.is_error)

    def reply_ended(self, message: object) -> dict[str, Any] | None:
        """The data of the request line of ``message`` when it is the turn's reply
        (an assistant message after the turn opened), else None."""
        if type(message) is not AssistantMessage or math.isnan(self._request_start):
            return None
        end = self._now()
        origin = self._origin
        data = {
            "run": self._run,
            "turn": self._turn,
            "request": {
                "start": _offset(self._request_start, origin),
                "first_token": _offset(self._first_token, origin),
                "end": _offset(end, origin),
            },
        }
        self._request_start = self._first_token = math.nan
        self.awaiting_first = False
        return data

    def batch_ended(self, stats: ev.TurnStats | None) -> dict[str, Any] | None:
        """The data of the batch line of the turn that ended (``stats`` from its
        ``TurnEnd``; None when the run ended without one), else None when the turn ran
        no call. The next turn starts afresh."""
        if not self._calls:
            return None
        origin = self._origin
        measured = {c.call_id: c for c in stats.calls} if stats is not None else {}
        calls = []
        for call in self._calls.values():
            timing = measured.get(call["id"])
            if timing is not None:
                call.update(start=timing.start, end=timing.end, waited=timing.waited)
            call["start"] = _offset(call["start"], origin)
            call["end"] = _offset(call["end"], origin)
            calls.append(call)
        self._calls = {}
        data: dict[str, Any] = {"run": self._run, "turn": self._turn, "calls": calls}
        if stats is not None:
            data["stats"] = _stats(stats)
        return data


def _stats(stats: ev.TurnStats) -> Mapping[str, Any]:
    return {
        "wall_time": round(stats.wall_time, 6),
        "critical_path": round(stats.critical_path, 6),
        "total_call_time": round(stats.total_call_time, 6),
        "peak_concurrency": stats.peak_concurrency,
        "waited_on_limit": round(stats.waited_on_limit, 6),
    }
