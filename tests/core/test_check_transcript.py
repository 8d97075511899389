"""``check_transcript``: every breach of the pairing invariant is found and listed.

Hand-written cases pin each kind of violation and its wording; a Hypothesis test
compares the checker against a deliberately naive reference on arbitrary transcripts
built from a small alphabet of ids (so collisions, orphans and reorderings are common).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.kit.loop import user
from trio_agent import (
    AssistantMessage,
    CustomMessage,
    Message,
    StopReason,
    Text,
    ToolCall,
    ToolResultMessage,
    TranscriptError,
    TrioAgentError,
    check_transcript,
)
from trio_agent._core._pairing import transcript_violations

if TYPE_CHECKING:
    from collections.abc import Sequence


def ask(*ids: str, stop_reason: StopReason = "tool_use") -> AssistantMessage:
    """An assistant message declaring one call per id (tool name = ``t_<id>``)."""
    return AssistantMessage(
        content=tuple(ToolCall(id=i, name=f"t_{i}", arguments={}) for i in ids),
        stop_reason=stop_reason,
        timestamp=0.0,
    )


def say(text: str = "done") -> AssistantMessage:
    return AssistantMessage(content=(Text(text=text),), stop_reason="stop", timestamp=0.0)


def res(call_id: str) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id, tool_name=f"t_{call_id}", content=(Text(text="ok"),), timestamp=0.0
    )


def note() -> CustomMessage:
    return CustomMessage(kind="note", content="n", timestamp=0.0)


def violations(messages: Sequence[Message]) -> list[str]:
    """What ``check_transcript`` reports (and that it raises exactly when it reports)."""
    expected = transcript_violations(messages)
    if not expected:
        check_transcript(messages)
        return []
    with pytest.raises(TranscriptError) as info:
        check_transcript(messages)
    assert list(info.value.violations) == expected
    return expected


# --- transcripts that keep the invariant ---------------------------------------------


@pytest.mark.parametrize(
    "messages",
    [
        pytest.param([], id="empty"),
        pytest.param([user()], id="one-user"),
        pytest.param([user(), say()], id="no-calls"),
        pytest.param([user(), ask("a"), res("a"), say()], id="one-call"),
        pytest.param([user(), ask("a", "b", "c"), res("a"), res("b"), res("c")], id="batch"),
        pytest.param(
            [user(), ask("a"), res("a"), ask("b", "c"), res("b"), res("c"), say()],
            id="two-turns",
        ),
        pytest.param(
            [note(), user(), ask("a"), res("a"), note(), user("more"), ask("b"), res("b")],
            id="custom-and-user-between-turns",
        ),
        pytest.param(
            [user(), ask("a", stop_reason="aborted"), res("a")], id="aborted-reply-paired"
        ),
        pytest.param([ask("a"), res("a")], id="starts-with-assistant"),
        pytest.param([user(), say(), say()], id="assistant-twice-without-calls"),
    ],
)
def test_paired_transcripts_pass(messages: list[Message]) -> None:
    assert violations(messages) == []
    check_transcript(tuple(messages))  # any sequence, tuples included


# --- each kind of violation ------------------------------------------------------------


def test_call_without_result() -> None:
    assert violations([user(), ask("a")]) == ["messages[1]: call 'a' has no result after it"]


def test_one_call_of_a_batch_without_result() -> None:
    assert violations([user(), ask("a", "b", "c"), res("a"), res("c"), say()]) == [
        "messages[1]: call 'b' has no result after it"
    ]


def test_two_results_for_one_call() -> None:
    assert violations([user(), ask("a"), res("a"), res("a")]) == [
        "messages[3]: second result for call 'a' (first at messages[2])"
    ]


def test_second_result_later_in_the_transcript() -> None:
    assert violations([user(), ask("a"), res("a"), user(), res("a")]) == [
        "messages[4]: second result for call 'a' (first at messages[2])"
    ]


def test_result_for_no_call() -> None:
    assert violations([user(), res("ghost")]) == ["messages[1]: result for no call (id 'ghost')"]


def test_result_for_no_call_inside_a_batch() -> None:
    assert violations([user(), ask("a"), res("a"), res("ghost"), say()]) == [
        "messages[3]: result for no call (id 'ghost')"
    ]


def test_results_out_of_declaration_order() -> None:
    assert violations([user(), ask("a", "b", "c"), res("c"), res("a"), res("b")]) == [
        "messages[2..4]: results out of declaration order "
        "(got ['c', 'a', 'b'], declared ['a', 'b', 'c'])"
    ]


def test_result_not_directly_after_its_assistant_message() -> None:
    assert violations([user(), ask("a"), user("wait"), res("a")]) == [
        "messages[3]: result for call 'a' is not directly after its assistant message "
        "(messages[1])",
    ]


def test_result_after_the_next_assistant_message() -> None:
    assert violations([user(), ask("a"), ask("b"), res("b"), res("a")]) == [
        "messages[4]: result for call 'a' is not directly after its assistant message "
        "(messages[1])",
    ]


def test_result_before_its_call() -> None:
    assert violations([user(), res("a"), ask("a")]) == [
        "messages[1]: result for call 'a' is not directly after its assistant message "
        "(messages[2])",
    ]


def test_result_after_a_custom_message() -> None:
    # A custom message between an assistant message and its results breaks "directly".
    assert violations([user(), ask("a"), note(), res("a")]) == [
        "messages[3]: result for call 'a' is not directly after its assistant message "
        "(messages[1])",
    ]


def test_duplicate_call_id_in_one_message() -> None:
    # The loop answers each distinct id once; the checker still flags the duplicate,
    # since no provider accepts such a transcript.
    assert violations([user(), ask("a", "a"), res("a")]) == [
        "messages[1]: duplicate call id 'a' in one message"
    ]


def test_call_id_declared_again_by_a_later_message() -> None:
    assert violations([user(), ask("a"), res("a"), ask("a"), res("a")]) == [
        "messages[3]: call id 'a' was already declared by messages[1]",
        "messages[4]: second result for call 'a' (first at messages[2])",
    ]


def test_every_violation_is_listed_not_only_the_first() -> None:
    messages: list[Message] = [
        res("orphan"),  # 0: result for no call
        user(),
        ask("a", "b", "a"),  # 2: duplicate id
        res("b"),  # 3..4: out of order
        res("a"),
        res("a"),  # 5: second result
        ask("c"),  # 6: no result
        say(),
    ]
    assert violations(messages) == [
        "messages[2]: duplicate call id 'a' in one message",
        "messages[0]: result for no call (id 'orphan')",
        "messages[5]: second result for call 'a' (first at messages[4])",
        "messages[3..5]: results out of declaration order (got ['b', 'a'], declared ['a', 'b'])",
        "messages[6]: call 'c' has no result after it",
    ]


def test_error_type_and_text() -> None:
    with pytest.raises(TranscriptError) as info:
        check_transcript([user(), ask("a", "b"), res("b")])
    err = info.value
    assert isinstance(err, TrioAgentError)
    assert isinstance(err, ValueError)
    assert err.violations == ("messages[1]: call 'a' has no result after it",)
    assert str(err) == (
        "transcript breaks the pairing invariant:\n  - messages[1]: call 'a' has no result after it"
    )


def test_only_tool_calls_count_not_text_or_thinking() -> None:
    message = AssistantMessage(
        content=(Text(text="let me look"), ToolCall(id="a", name="t", arguments={})),
        stop_reason="tool_use",
        timestamp=0.0,
    )
    assert violations([user(), message, res("a")]) == []
    assert violations([user(), message]) == ["messages[1]: call 'a' has no result after it"]


# --- against a naive reference ---------------------------------------------------------


def reference_is_paired(messages: Sequence[Message]) -> bool:
    """The invariant read literally: every assistant message with calls is followed by
    exactly one result per call, in declaration order; ids are unique across the whole
    transcript; no result stands anywhere else."""
    declared: set[str] = set()
    i = 0
    while i < len(messages):
        m = messages[i]
        if isinstance(m, ToolResultMessage):
            return False
        if isinstance(m, AssistantMessage):
            ids = [c.id for c in m.tool_calls]
            if len(set(ids)) != len(ids) or declared & set(ids):
                return False
            declared |= set(ids)
            block = messages[i + 1 : i + 1 + len(ids)]
            got = [r.tool_call_id if isinstance(r, ToolResultMessage) else None for r in block]
            if got != ids:
                return False
            i += 1 + len(ids)
        else:
            i += 1
    return True


IDS = st.sampled_from(["a", "b", "c"])
MESSAGES = st.one_of(
    st.builds(user),
    st.builds(note),
    st.lists(IDS, max_size=3).map(lambda ids: ask(*ids)),
    st.sampled_from(["a", "b", "c", "z"]).map(res),
)


@given(st.lists(MESSAGES, max_size=10))
def test_agrees_with_the_reference(messages: list[Message]) -> None:
    found = violations(messages)
    assert (not found) == reference_is_paired(messages), found


@st.composite
def paired_transcripts(draw: st.DrawFn) -> list[Message]:
    """Transcripts that keep the invariant by construction, with unique ids."""
    out: list[Message] = []
    counter = 0
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["user", "note", "text", "calls"]))
        if kind == "user":
            out.append(user())
        elif kind == "note":
            out.append(note())
        elif kind == "text":
            out.append(say())
        else:
            n = draw(st.integers(1, 4))
            ids = [f"id{counter + k}" for k in range(n)]
            counter += n
            out.append(ask(*ids))
            out.extend(res(i) for i in ids)
    return out


@given(paired_transcripts())
def test_paired_by_construction_passes(messages: list[Message]) -> None:
    assert violations(messages) == []


@given(paired_transcripts(), st.data())
def test_any_single_breakage_is_reported(messages: list[Message], data: st.DataObject) -> None:
    results = [i for i, m in enumerate(messages) if isinstance(m, ToolResultMessage)]
    batches = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, AssistantMessage) and len(m.tool_calls) >= 2
    ]
    kinds = ["orphan"]
    if results:
        kinds += ["drop", "repeat", "detach"]
    if batches:
        kinds += ["swap", "dup-id"]
    kind = data.draw(st.sampled_from(kinds), label="breakage")
    broken = list(messages)
    if kind == "orphan":
        at = data.draw(st.integers(0, len(broken)), label="at")
        broken.insert(at, res("nobody"))
        expected = "result for no call (id 'nobody')"
    elif kind in ("drop", "repeat", "detach"):
        at = data.draw(st.sampled_from(results), label="result")
        r = broken[at]
        assert isinstance(r, ToolResultMessage)
        cid = r.tool_call_id
        if kind == "drop":
            del broken[at]
            expected = f"call {cid!r} has no result after it"
        elif kind == "repeat":
            broken.append(r)
            expected = f"second result for call {cid!r}"
        else:
            del broken[at]
            broken.append(user("in between"))
            broken.append(r)
            expected = f"result for call {cid!r} is not directly after its assistant message"
    else:
        at = data.draw(st.sampled_from(batches), label="batch")
        a = broken[at]
        assert isinstance(a, AssistantMessage)
        if kind == "swap":
            broken[at + 1], broken[at + 2] = broken[at + 2], broken[at + 1]
            expected = "results out of declaration order"
        else:
            first = a.tool_calls[0].id
            broken[at] = ask(*(c.id for c in a.tool_calls), first)
            expected = f"duplicate call id {first!r} in one message"
    found = violations(broken)
    assert any(expected in v for v in found), (kind, found)


def test_waiting_calls_may_be_unanswered_only_at_the_end_of_the_transcript() -> None:
    from tests.kit.loop import call, tool_use, user
    from trio_agent import Text, ToolResultMessage, repair

    def result(cid: str) -> ToolResultMessage:
        return ToolResultMessage(
            tool_call_id=cid, tool_name="probe", content=(Text(text="ok"),), timestamp=1.0
        )

    waiting_end = [user(), tool_use(call("a"), call("b"), call("c"), timestamp=1.0), result("a")]
    assert transcript_violations(waiting_end, waiting={"b", "c"}) == []
    assert len(transcript_violations(waiting_end)) == 2  # without the waiting ids: broken
    assert repair(waiting_end, waiting={"b", "c"}) == tuple(waiting_end)
    # A waiting call with a result, or one that messages follow, is a breach.
    assert transcript_violations(waiting_end, waiting={"a", "b", "c"}) == [
        "call 'a' waits for a decision but has a result"
    ]
    followed = [*waiting_end, user("more")]
    problems = transcript_violations(followed, waiting={"b", "c"})
    assert "call 'b' waits for a decision but is not a call of the last reply" in problems[0]
