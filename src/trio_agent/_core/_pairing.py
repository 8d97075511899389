"""Transcript checks: the pairing invariant as a function."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ._errors import TranscriptError
from ._messages import (
    AssistantMessage,
    Message,
    Text,
    ToolCall,
    ToolResultMessage,
)
from ._validators import as_history

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

__all__ = ["check_transcript", "repair", "transcript_violations"]


def transcript_violations(
    messages: Sequence[Message], *, waiting: Collection[str] = ()
) -> list[str]:
    """Every breach of the pairing invariant in ``messages``, as readable lines.

    The invariant: every tool-call id has exactly one ``ToolResultMessage``, and the
    results of one assistant message follow it directly, in declaration order.

    A transcript that ends in a deferral waits: the calls named in ``waiting`` (a
    deferred run's ``result.deferral.waiting_ids``; ``LoadedTranscript.waiting`` for a
    file) have no result yet, and that is no breach — provided each is a call of the last
    assistant message, nothing but results of that message follows it (no request could
    have been made since), and none has a result. The results it has stay in declaration
    order; the waiting ones are appended after them when they are answered.

    Raises:
        TypeError: ``messages`` is not a sequence of messages (a ``str``, or an item that
            is not a message).
    """
    messages = as_history(messages, "messages")
    problems: list[str] = []
    waits = _waiting_breaches(messages, waiting, problems) if waiting else frozenset()
    owner: dict[str, int] = {}  # call id -> index of the assistant message declaring it
    for i, m in enumerate(messages):
        if type(m) is AssistantMessage:
            seen_here: set[str] = set()
            for call in m.tool_calls:
                if call.id in seen_here:
                    problems.append(f"messages[{i}]: duplicate call id {call.id!r} in one message")
                elif call.id in owner:
                    problems.append(
                        f"messages[{i}]: call id {call.id!r} was already declared by "
                        f"messages[{owner[call.id]}]"
                    )
                else:
                    owner[call.id] = i
                seen_here.add(call.id)

    result_ids = {m.tool_call_id for m in messages if type(m) is ToolResultMessage}
    answered: dict[str, int] = {}
    i = 0
    n = len(messages)
    while i < n:
        m = messages[i]
        if type(m) is ToolResultMessage:
            # A result not in the block right after an assistant message.
            _misplaced(problems, i, m, owner, answered)
            i += 1
            continue
        if type(m) is not AssistantMessage or not m.tool_calls:
            i += 1
            continue
        # Dicts and sets, not lists: a message with thousands of calls stays linear.
        expected: dict[str, None] = {}
        for call in m.tool_calls:
            if owner.get(call.id) == i:
                expected[call.id] = None
        j = i + 1
        got: list[str] = []
        got_ids: set[str] = set()
        while j < n and type(messages[j]) is ToolResultMessage:
            r = messages[j]
            assert type(r) is ToolResultMessage
            rid = r.tool_call_id
            if rid in answered:
                problems.append(
                    f"messages[{j}]: second result for call {rid!r} "
                    f"(first at messages[{answered[rid]}])"
                )
            elif rid in expected:
                answered[rid] = j
                got.append(rid)
                got_ids.add(rid)
            else:
                _misplaced(problems, j, r, owner, answered)
            j += 1
        order = [cid for cid in expected if cid in got_ids]
        if got != order:
            problems.append(
                f"messages[{i + 1}..{j - 1}]: results out of declaration order "
                f"(got {got}, declared {order})"
            )
        for cid in expected:
            if (
                cid not in got_ids
                and cid not in answered
                and cid not in result_ids
                and cid not in waits
            ):
                problems.append(f"messages[{i}]: call {cid!r} has no result after it")
            # A result elsewhere is reported where it stands ("not directly after ...").
        i = j
    return problems


def _waiting_breaches(
    messages: Sequence[Message], waiting: Collection[str], problems: list[str]
) -> frozenset[str]:
    """The waiting ids that may stay unanswered: those of the last assistant message
    with nothing but results after it. Reports every other waiting id. The one rule of
    what a transcript that waits for decisions may look like."""
    last = len(messages) - 1
    while last >= 0 and type(messages[last]) is ToolResultMessage:
        last -= 1
    reply = messages[last] if last >= 0 else None
    declared = {c.id for c in reply.tool_calls} if type(reply) is AssistantMessage else set[str]()
    results = {m.tool_call_id for m in messages if type(m) is ToolResultMessage}
    ok: set[str] = set()
    for cid in sorted(waiting):
        if cid in results:
            problems.append(f"call {cid!r} waits for a decision but has a result")
        elif cid not in declared:
            problems.append(
                f"call {cid!r} waits for a decision but is not a call of the last reply "
                "(messages follow it)"
            )
        else:
            ok.add(cid)
    return frozenset(ok)


def _misplaced(
    problems: list[str],
    j: int,
    r: ToolResultMessage,
    owner: dict[str, int],
    answered: dict[str, int],
) -> None:
    rid = r.tool_call_id
    if rid not in owner:
        problems.append(f"messages[{j}]: result for no call (id {rid!r})")
    elif rid in answered:
        problems.append(
            f"messages[{j}]: second result for call {rid!r} (first at messages[{answered[rid]}])"
        )
    else:
        answered[rid] = j
        problems.append(
            f"messages[{j}]: result for call {rid!r} is not directly after its assistant "
            f"message (messages[{owner[rid]}])"
        )


def check_transcript(messages: Sequence[Message], *, waiting: Collection[str] = ()) -> None:
    """Raise :class:`TranscriptError` listing every breach of the pairing invariant.

    ``waiting``: the ids of calls that wait for a decision (a transcript that ends in a
    deferral: ``result.deferral.waiting_ids``, ``LoadedTranscript.waiting``): they may
    have no result yet — provided each is a call of the last assistant message, nothing
    but results of that message follows it, and none has a result.

    Checks: a call without a result, two results for one call, a result for no call, a
    result out of declaration order or not directly after its assistant message, and
    duplicate call ids. Returns None when the transcript is paired; the error's
    ``violations`` list the breaches one line each, naming messages by index.

    Raises:
        TranscriptError: the transcript breaks the invariant.
    """
    problems = transcript_violations(messages, waiting=waiting)
    if problems:
        raise TranscriptError(problems)


RECOVERED_TEXT = "Tool call aborted: the run stopped before this call had a result."


def _recovered_result(call: ToolCall, timestamp: float) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=(Text(text=RECOVERED_TEXT),),
        details={
            "outcome": "aborted",
            "recovered": True,
            "note": "added on recovery: the transcript had no result for this call",
        },
        is_error=True,
        timestamp=timestamp,
    )


def repair(
    messages: Sequence[Message],
    *,
    timestamp: float | None = None,
    waiting: Collection[str] = (),
) -> tuple[Message, ...]:
    """Give every tool call that has no result an ``aborted`` result, so a run can resume.

    Meant for a transcript cut short by a crash (see :func:`load_transcript`): the calls
    of the last assistant message, or some of them, have no result yet. Each call id
    with no ``ToolResultMessage`` anywhere gets one — ``is_error=True``, an "aborted"
    text, and ``details`` saying it was added on recovery — placed in the block of
    results right after its assistant message, in declaration order among the results
    already there. Nothing else is changed: other breaches of the pairing invariant (a
    result in the wrong place, a second result, duplicate call ids) stay, and
    :func:`check_transcript` still reports them. A paired transcript comes back equal.

    Args:
        messages: the transcript.
        timestamp: of the added results (default: now).
        waiting: the ids of calls that wait for a decision (a transcript that ends in a
            deferral: ``LoadedTranscript.waiting``); they get no result, so ``resume``
            can still answer them.

    Returns:
        The repaired transcript. When it ended in an assistant message with tool calls, it
        now ends in their results, so ``run_agent_loop([], Context(messages=...), model)``
        can continue it.

    Raises:
        TypeError: ``messages`` is not a sequence of messages.
    """
    messages = as_history(messages, "messages")
    answered = {m.tool_call_id for m in messages if type(m) is ToolResultMessage}
    answered.update(waiting)
    stamp = time.time() if timestamp is None else timestamp
    out: list[Message] = []
    i, n = 0, len(messages)
    while i < n:
        m = messages[i]
        out.append(m)
        i += 1
        if type(m) is not AssistantMessage:
            continue
        declared: dict[str, ToolCall] = {}
        for call in m.tool_calls:
            declared.setdefault(call.id, call)
        missing = [c for cid, c in declared.items() if cid not in answered]
        if not missing:
            continue
        answered.update(c.id for c in missing)  # a later message re-declaring an id: once
        order = {cid: k for k, cid in enumerate(declared)}
        # Merge the missing results into the block that follows, by declaration order.
        nxt = 0
        while i < n and type(messages[i]) is ToolResultMessage:
            r = messages[i]
            assert type(r) is ToolResultMessage
            k = order.get(r.tool_call_id)
            while k is not None and nxt < len(missing) and order[missing[nxt].id] < k:
                out.append(_recovered_result(missing[nxt], stamp))
                nxt += 1
            out.append(r)
            i += 1
        out.extend(_recovered_result(c, stamp) for c in missing[nxt:])
    return tuple(out)
