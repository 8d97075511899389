"""The one in-memory stream and the one stream wrapper every user builds on.

``MemoryStream`` plays the test kit's ``ScriptedModel``, replay's ``ReplayModel`` and the
benchmarks' floor; ``StreamWrapper`` is the observer's request observation, replay's
recorder and the demo's pacing. Each rule is checked once here, on the class itself, and
through the users whose behaviour depends on it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

from tests.kit.loop import prompt, reply
from trio_agent import (
    AssistantEvent,
    Context,
    Done,
    Error,
    LoopConfig,
    Start,
    TextDelta,
    TextStart,
    run_agent_loop,
)
from trio_agent._run._streams import MemoryStream, StreamWrapper
from trio_agent.testing import ScriptedModel, events_for

if TYPE_CHECKING:
    from collections.abc import AsyncIterable
    from contextlib import AbstractAsyncContextManager


class _Owner:
    def __init__(self) -> None:
        self.open_streams = 0
        self._event_holds: dict[tuple[int, int], Any] | None = None


async def test_a_memory_stream_yields_before_its_first_event_only() -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await trio.lowlevel.checkpoint()
            ticks += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        stream = MemoryStream(list(range(50)))
        with trio.testing.assert_checkpoints():
            first = await stream.__anext__()
        before = ticks
        rest = [event async for event in stream]
        # No other task ran while the other 49 events and the end were read.
        assert ticks == before
        nursery.cancel_scope.cancel()
    assert [first, *rest] == list(range(50))


async def test_a_memory_stream_checks_for_cancellation_before_each_event() -> None:
    stream = MemoryStream([1, 2, 3])
    got: list[int] = []
    with trio.CancelScope() as scope:
        got.append(await stream.__anext__())
        scope.cancel()
        got.append(await stream.__anext__())
    assert scope.cancelled_caught
    assert got == [1]


async def test_a_memory_stream_is_counted_while_open_and_awaits_its_owners_holds() -> None:
    owner = _Owner()
    waited: list[tuple[str, int]] = []

    async def hold() -> None:
        await trio.lowlevel.checkpoint()
        waited.append(("held", len(got)))

    owner._event_holds = {(3, 1): hold}
    got: list[str] = []
    async with MemoryStream(["a", "b"], owner, 3) as stream:
        assert owner.open_streams == 1
        async for event in stream:
            got.append(event)
    assert owner.open_streams == 0
    assert got == ["a", "b"]
    assert waited == [("held", 1)]  # before event 1 of request 3, once


async def test_scripted_model_streams_are_memory_streams_with_their_pauses() -> None:
    message = reply("hi")
    model = ScriptedModel([message])
    pause = model.pause_at(0, 2)
    async with trio.open_nursery() as nursery, model.stream(_REQUEST) as stream:
        assert isinstance(stream, MemoryStream)
        nursery.start_soon(_release_when_reached, pause)
        events = [event async for event in stream]
    assert events == events_for(message)
    assert model.open_streams == 0


async def _release_when_reached(pause: Any) -> None:
    await pause.reached.wait()
    pause.release()


class _Seen(StreamWrapper):
    """A wrapper that notes each hook call."""

    __slots__ = ("calls",)

    def __init__(self, inner: AbstractAsyncContextManager[AsyncIterable[AssistantEvent]]) -> None:
        super().__init__(inner)
        self.calls: list[tuple[str, Any]] = []

    def _event(self, event: AssistantEvent) -> None:
        self.calls.append(("event", type(event).__name__))

    def _last(self, event: Done | Error) -> None:
        self.calls.append(("last", event.message.text))

    def _raised(self, exc: BaseException) -> None:
        self.calls.append(("raised", type(exc).__name__))

    def _end(self, error: BaseException | None) -> None:
        self.calls.append(("end", None if error is None else type(error).__name__))


_REQUEST: Any = None


async def test_the_wrapper_hands_everything_on_and_names_the_first_end_event_last() -> None:
    first, second = reply("first"), reply("second")
    events: list[AssistantEvent] = [Start(), TextStart(index=0), Done(message=first)]
    events += [Error(message=reply("late", "error")), Done(message=second)]
    wrapper = _Seen(MemoryStream(events))
    async with wrapper as stream:
        got = [event async for event in stream]
    assert got == events
    assert wrapper.last == Done(message=first)
    assert wrapper.calls == [
        ("event", "Start"),
        ("event", "TextStart"),
        ("event", "Done"),
        ("last", "first"),
        ("event", "Error"),
        ("event", "Done"),
        ("raised", "StopAsyncIteration"),
        ("end", None),
    ]


class _FailingEnter:
    async def __aenter__(self) -> Any:
        raise ConnectionError("refused")

    async def __aexit__(self, *exc: object) -> None:
        raise AssertionError("never entered, never left")


async def test_the_wrapper_ends_once_when_entering_fails_or_its_body_raises() -> None:
    refused = _Seen(_FailingEnter())
    with pytest.raises(ConnectionError):
        async with refused:
            pass
    assert refused.calls == [("raised", "ConnectionError"), ("end", "ConnectionError")]

    left = _Seen(MemoryStream([Start(), TextStart(index=0)]))
    with pytest.raises(KeyError):
        async with left as stream:
            async for _ in stream:
                raise KeyError("consumer bug")
    assert left.calls == [("event", "Start"), ("raised", "KeyError"), ("end", "KeyError")]
    assert left.last is None


async def test_a_last_event_without_a_message_is_no_reply_to_the_observer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A Done carrying something that is not a message makes the stream malformed: the
    # loop fails the reply, and the observation ends with no final message — and the
    # request's log line is still written.
    ended: list[Any] = []

    class Observation:
        def activate(self) -> object:
            return None

        def deactivate(self, token: object) -> None:
            pass

        def first_chunk(self) -> None:
            pass

        def end(self, *, message: Any, error: BaseException | None) -> None:
            ended.append(message)

    class Observer:
        def start_run(self, **kwargs: Any) -> Any:
            return _NoObservation()

        def start_request(self, **kwargs: Any) -> Observation:
            return Observation()

        def start_tool_call(self, **kwargs: Any) -> Any:
            return _NoObservation()

    model = ScriptedModel([[Start(), Done(message="not a message")]])  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG, logger="trio_agent"):
        result = await run_agent_loop(prompt(), Context(), model, LoopConfig(observer=Observer()))
    assert result.reason == "error"
    assert ended == [None]
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("model request")]
    assert len(lines) == 1
    assert "no reply" in lines[0]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


class _NoObservation:
    def activate(self) -> object:
        return None

    def deactivate(self, token: object) -> None:
        pass

    def end(self, **kwargs: Any) -> None:
        pass


async def test_the_demo_pacing_waits_per_delta(autojump_clock: trio.testing.MockClock) -> None:
    from trio_agent.cli._demo_script import PacedModel

    message = reply("abcd")
    model = ScriptedModel([message], chunk_size=1)
    paced = PacedModel(model, 0.5)
    start = trio.current_time()
    async with paced.stream(_REQUEST) as stream:
        events = [event async for event in stream]
    assert events == events_for(message, chunk_size=1)
    deltas = sum(type(e) is TextDelta for e in events)
    assert trio.current_time() - start == pytest.approx(0.5 * 15 + 0.5 * deltas)
    assert model.open_streams == 0
