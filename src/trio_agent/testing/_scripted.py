"""``ScriptedModel``: a model that replays a script, for tests and demos."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, TypeAlias

import attrs
import trio

from .._core import AssistantMessage, ModelRequest, Text, Thinking, ToolCall
from .._core import events as ev
from .._run import MemoryStream

if TYPE_CHECKING:
    from .._run import EventHolds

__all__ = ["PausePoint", "Response", "ScriptedModel", "events_for"]

Events: TypeAlias = Sequence[ev.AssistantEvent]
Response: TypeAlias = (
    AssistantMessage | Events | Callable[[ModelRequest], "AssistantMessage | Events"]
)


def _chunks(text: str, size: int | None) -> list[str]:
    if not text:
        return []
    if size is None or size >= len(text):
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


def events_for(
    message: AssistantMessage, *, chunk_size: int | None = None
) -> list[ev.AssistantEvent]:
    """The event stream a well-behaved provider would send for ``message``.

    Text and thinking are split into deltas of ``chunk_size`` characters (one delta when
    None); a tool call's arguments are sent as one JSON fragment (its
    ``raw_arguments`` when it has them). The stream ends with
    ``Error`` for stop reasons ``error``/``aborted``, else ``Done``.
    """
    out: list[ev.AssistantEvent] = [ev.Start()]
    for i, block in enumerate(message.content):
        if type(block) is Text:
            out.append(ev.TextStart(index=i))
            out.extend(ev.TextDelta(index=i, delta=d) for d in _chunks(block.text, chunk_size))
            out.append(ev.TextEnd(index=i, text=block.text))
        elif type(block) is Thinking:
            out.append(ev.ThinkingStart(index=i))
            out.extend(
                ev.ThinkingDelta(index=i, delta=d) for d in _chunks(block.thinking, chunk_size)
            )
            out.append(ev.ThinkingEnd(index=i, thinking=block.thinking, signature=block.signature))
        elif type(block) is ToolCall:
            out.append(ev.ToolCallStart(index=i, id=block.id, name=block.name))
            raw = block.raw_arguments
            delta = json.dumps(dict(block.arguments)) if raw is None else raw
            out.append(ev.ToolCallDelta(index=i, delta=delta))
            out.append(ev.ToolCallEnd(index=i, tool_call=block))
    if message.stop_reason in ("error", "aborted"):
        out.append(ev.Error(message=message))
    else:
        out.append(ev.Done(message=message))
    return out


@attrs.define(eq=False)
class PausePoint:
    """Where a :class:`ScriptedModel` stream stops until released.

    ``reached`` is set when the stream gets there; :meth:`release` lets it go on.
    Made by ``ScriptedModel.pause_at``.

    Attributes:
        step: the request (0-based) whose stream pauses.
        index: the event (0-based) the stream pauses before.
        reached: a ``trio.Event`` set when the stream arrives at the point.
    """

    step: int
    index: int
    reached: trio.Event = attrs.field(factory=trio.Event)
    _released: trio.Event = attrs.field(factory=trio.Event, alias="released")

    def release(self) -> None:
        """Let the stream go on (from any task of the trio loop; not a checkpoint)."""
        self._released.set()

    async def wait_released(self) -> None:
        """Wait until :meth:`release` is called (returns at once if it was). A
        checkpoint; a cancel leaves the point unreleased."""
        await self._released.wait()


@attrs.define
class _Hold:
    """What a stream of a :class:`ScriptedModel` does before one of its events: wait at
    a pause point until released, then raise a failure (each optional)."""

    pause: PausePoint | None = None
    failure: BaseException | None = None

    async def __call__(self) -> None:
        if self.pause is not None:
            self.pause.reached.set()
            await self.pause.wait_released()
        if self.failure is not None:
            raise self.failure


class ScriptedModel:
    """Replays one response per request, as a stream, and records every request.

    Args:
        responses: per request, in order: an ``AssistantMessage`` (streamed as a
            well-behaved provider would, see :func:`events_for`), a raw list of
            assistant events (sent as is — for malformed streams), or a callable taking
            the ``ModelRequest`` and returning either.
        chunk_size: split text into deltas of this many characters.
        keep_requests: record every request in ``requests`` (the default). False keeps
            only their number: a run of many turns would otherwise hold a copy of the
            conversation per request — quadratic memory, and as much for the garbage
            collector to walk — which a real provider, sending each request once,
            never holds (benchmarks and long runs set it).

    The first event is a full checkpoint (it yields, like a first network read); each
    later one only checks for cancellation. No task is started per stream.
    When the responses run out, the stream ends with an ``Error`` saying so.

    Attributes:
        requests: every ``ModelRequest`` received, in order (empty when created with
            ``keep_requests=False``).
        request_count: how many requests were received.
        open_streams: streams entered and not yet left (0 after a clean run: the loop
            closed every stream it opened).
    """

    def __init__(
        self,
        responses: Iterable[Response] = (),
        *,
        chunk_size: int | None = None,
        keep_requests: bool = True,
    ) -> None:
        self._responses = list(responses)
        self._chunk_size = chunk_size
        self._keep_requests = keep_requests
        self.request_count = 0
        # Created on first use: a thousand models at once (one per run) stay small.
        self._cache: dict[int, Sequence[ev.AssistantEvent]] | None = None
        # Pauses and failures by (request, event), read by the streams at each event.
        self._event_holds: EventHolds | None = None
        self.requests: list[ModelRequest] = []
        self.open_streams = 0

    def add(self, *responses: Response) -> None:
        """Append responses to the script."""
        self._responses.extend(responses)

    def pause_at(self, step: int, index: int) -> PausePoint:
        """Pause request ``step`` (0-based) before it sends event ``index`` (0-based)."""
        point = PausePoint(step=step, index=index)
        self._hold(step, index).pause = point
        return point

    def fail_at(self, step: int, index: int, error: BaseException) -> None:
        """Make request ``step`` raise ``error`` instead of sending event ``index``."""
        self._hold(step, index).failure = error

    def _hold(self, step: int, index: int) -> _Hold:
        if self._event_holds is None:
            self._event_holds = {}
        hold = self._event_holds.get((step, index))
        if not isinstance(hold, _Hold):
            hold = self._event_holds[(step, index)] = _Hold()
        return hold

    def _events(self, step: int, request: ModelRequest) -> Sequence[ev.AssistantEvent]:
        if step >= len(self._responses):
            return [
                ev.Error(
                    message=AssistantMessage(
                        content=(),
                        stop_reason="error",
                        error_message=(
                            f"ScriptedModel has no response left for request {step + 1} "
                            f"(the script has {len(self._responses)})"
                        ),
                    )
                )
            ]
        response = self._responses[step]
        if callable(response):
            response = response(request)
        elif isinstance(response, list | tuple):
            return response  # an event list, replayed as it is (no copy per model)
        elif self._cache is not None and step in self._cache:
            return self._cache[step]
        events: Sequence[ev.AssistantEvent]
        if isinstance(response, AssistantMessage):
            events = events_for(response, chunk_size=self._chunk_size)
        else:
            events = list(response)
        if not callable(self._responses[step]):
            if self._cache is None:
                self._cache = {}
            self._cache[step] = events
        return events

    def stream(self, request: ModelRequest) -> MemoryStream[ev.AssistantEvent]:
        """The next response, as a stream (the ``Model`` protocol); records ``request``.

        Entering and iterating follow the rules above; leaving the ``async with``
        early is safe at any time.
        """
        step = self.request_count
        self.request_count = step + 1
        if self._keep_requests:
            self.requests.append(request)
        return MemoryStream(self._events(step, request), self, step)
