"""Context policies on any paired transcript (the kit's ``transcripts()``, with large
tool outputs and parallel batches), any policy and any window.

For each, the compacted view is checked to be:

- paired: every call answered, every result right after its call, in declaration order
  (``transcript_violations`` finds nothing);
- shaped as providers require: its first message that is sent is a user message, when
  the history's is;
- within the window by the estimate, whenever the smallest view the policy may make
  (the kept head, the note, the newest turn) is;
- the newest turns verbatim (the same message objects): ``KeepRecent`` keeps the newest
  ``turns`` of them unless one more would not fit; ``ElideToolOutputs`` leaves the
  newest ``older_than`` whole; ``Summarize`` (its summary from a scripted model) keeps
  at least the newest turn, and one summary message between the kept head and the
  newest messages.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, TypeVar

import trio
from hypothesis import given
from hypothesis import strategies as st

from trio_agent import (
    AssistantMessage,
    CustomMessage,
    Message,
    ModelOptions,
    Text,
    ToolResultMessage,
    UserMessage,
    check_transcript,
)
from trio_agent.context import (
    ContextRequest,
    ElideToolOutputs,
    KeepRecent,
    Policy,
    Summarize,
    compose,
    message_chars,
    turn_starts,
)
from trio_agent.testing import ScriptedModel, transcripts

if TYPE_CHECKING:
    from collections.abc import Coroutine

T = TypeVar("T")

histories = transcripts(max_turns=10, max_calls=3, max_output=20_000)
windows = st.none() | st.integers(50, 40_000)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """The value of a coroutine that never awaits (these policies make no request)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    raise AssertionError("the policy awaited")


def request(window: int | None) -> ContextRequest:
    return ContextRequest(
        system_prompt="",
        tools=(),
        model=ScriptedModel(),
        options=ModelOptions(context_window=window),
    )


def tokens(messages: tuple[Message, ...]) -> int:
    """The estimate of a fresh policy (4 characters a token)."""
    return math.ceil(sum(message_chars(m) for m in messages) / 4)


def limit_of(window: int) -> int:
    return window - window // 8


def sent(messages: tuple[Message, ...]) -> list[Message]:
    return [m for m in messages if type(m) is not CustomMessage]


def check_shape(history: tuple[Message, ...], view: tuple[Message, ...]) -> None:
    check_transcript(view)
    shown = sent(view)
    if sent(history) and type(sent(history)[0]) is UserMessage:
        assert type(shown[0]) is UserMessage


def newest(history: tuple[Message, ...], n: int) -> int:
    """Where the newest ``n`` turns start."""
    first = len(history)
    for k, start in enumerate(turn_starts(history, 0)):
        if k >= n:
            break
        first = start
    return first


@given(history=histories, turns=st.integers(1, 6), keep_first=st.booleans(), window=windows)
def test_keep_recent(
    history: tuple[Message, ...], turns: int, keep_first: bool, window: int | None
) -> None:
    policy = KeepRecent(turns, keep_first=keep_first)
    view = run(policy.compact(history, request(window))).messages
    check_shape(history, view)
    total = len(list(turn_starts(history, 0)))
    # The kept turns are the history's newest, the same objects.
    kept = 0
    for n in range(1, total + 1):
        tail = history[newest(history, n) :]
        if len(tail) <= len(view) and all(
            a is b for a, b in zip(view[-len(tail) :], tail, strict=True)
        ):
            kept = n
    if total:
        assert kept >= 1
    wanted = min(turns, total)
    if window is None:
        assert kept >= wanted
        return
    limit = limit_of(window)
    if kept < wanted:
        # One turn more would not fit.
        bigger = view[: len(view) - len(history[newest(history, kept) :])]
        more = history[newest(history, kept + 1) :]
        assert tokens(bigger) + tokens(more) > limit - 4
    # Fits, whenever the smallest view (head, note, newest turn) does.
    smallest = (
        view[: len(view) - len(history[newest(history, kept) :])] + history[newest(history, 1) :]
    )
    if tokens(smallest) <= limit:
        assert tokens(view) <= limit


@given(
    history=histories,
    older_than=st.integers(0, 4),
    keep_chars=st.integers(0, 300),
    window=windows,
)
def test_elide_tool_outputs(
    history: tuple[Message, ...], older_than: int, keep_chars: int, window: int | None
) -> None:
    view = run(ElideToolOutputs(older_than, keep_chars).compact(history, request(window))).messages
    check_shape(history, view)
    assert len(view) == len(history)
    whole = newest(history, older_than) if older_than else len(history)
    assert all(a is b for a, b in zip(view[whole:], history[whole:], strict=True))
    for before, after in zip(history[:whole], view[:whole], strict=True):
        if type(before) is ToolResultMessage:
            assert type(after) is ToolResultMessage
            assert after.tool_call_id == before.tool_call_id
            assert len(after.text) <= max(len(before.text), keep_chars + 200)
        else:
            assert after is before
    assert tokens(view) <= tokens(history)


@given(
    history=histories,
    turns=st.integers(1, 6),
    older_than=st.integers(1, 3),
    window=windows,
)
def test_composed(
    history: tuple[Message, ...], turns: int, older_than: int, window: int | None
) -> None:
    policy: Policy = compose(ElideToolOutputs(older_than, 100), KeepRecent(turns))
    view = run(policy.compact(history, request(window))).messages
    check_shape(history, view)
    # The newest turn is always there, verbatim.
    tail = history[newest(history, 1) :]
    assert all(a is b for a, b in zip(view[len(view) - len(tail) :], tail, strict=True))
    if window is not None:
        smallest = run(
            compose(ElideToolOutputs(older_than, 100), KeepRecent(1)).compact(
                history, request(None)
            )
        ).messages
        if tokens(smallest) <= limit_of(window) - 64:
            assert tokens(view) <= limit_of(window)


@given(
    history=histories,
    keep_recent=st.integers(1, 4),
    keep_first=st.booleans(),
    window=st.integers(50, 40_000),
)
def test_summarize(
    history: tuple[Message, ...], keep_recent: int, keep_first: bool, window: int
) -> None:
    summariser = ScriptedModel([AssistantMessage(content=(Text(text="sum"),), stop_reason="stop")])
    policy = Summarize(summariser, keep_recent=keep_recent, keep_first=keep_first)
    view = trio.run(policy.compact, history, request(window)).messages
    check_shape(history, view)
    # The newest turn is always there, verbatim.
    tail = history[newest(history, 1) :]
    assert all(a is b for a, b in zip(view[len(view) - len(tail) :], tail, strict=True))
    if policy.summaries:
        # One summary message stands for what it replaced; after it, the history's
        # newest messages verbatim; before it, at most the kept head.
        at = [
            i
            for i, m in enumerate(view)
            if type(m) is UserMessage and m.content[0].text.endswith("sum")  # type: ignore[union-attr]
        ]
        assert len(at) == 1
        rest = view[at[0] + 1 :]
        assert all(a is b for a, b in zip(rest, history[len(history) - len(rest) :], strict=True))
        assert all(a is b for a, b in zip(view[: at[0]], history, strict=False))
