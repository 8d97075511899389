"""``assert_run_invariants``: the run invariants, checked on one finished run.

Every check reads only what a caller of the loop has in hand afterwards — the result,
the events it received, the requests its model received, and the context it passed in —
so users can run the same checks on their own models and tools. Two invariants need
more than that and are checked by :class:`~trio_agent.testing.ScriptRun` instead: "no
task alive after the run" and "the tools' ``finally`` blocks ran".

The checker collects every breach before failing, and each line names its invariant, so
one failing run explains itself::

    AssertionError: 2 run invariants broken:
      - [1 pairing] request 2: messages[3]: call 'c0.1' has no result after it
      - [5 call events] call 'c0.1': ToolExecutionUpdate after its ToolExecutionEnd

Importing this module does not import Hypothesis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import attrs

from .._core import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    TranscriptFormatError,
    Usage,
    dumps,
    loads,
    transcript_violations,
)
from .._core import events as ev

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._core import AgentRunResult, Context, Deferral, ModelRequest

__all__ = ["assert_run_invariants", "distinct_calls_view", "run_invariant_violations"]


def assert_run_invariants(
    result: AgentRunResult,
    events: Sequence[ev.AgentEvent],
    requests: Sequence[ModelRequest],
    context_before: Context,
    *,
    context: Context | None = None,
    prompts: Sequence[Message] | None = None,
    polled: Sequence[Message] | None = None,
    max_steps: int | None = None,
    requests_at_abort: int | None = None,
    context_swapped: bool = False,
    tool_execution: Literal["parallel", "sequential"] = "parallel",
    resumed_from: Deferral | None = None,
) -> None:
    """Check the run invariants on one finished run; raise ``AssertionError`` if broken.

    Args:
        result: how the run ended (``run.result``, the return value of
            ``run_agent_loop``, or ``AgentRunError.result``).
        events: every event the run delivered, in order (all of them: from ``AgentStart``
            to ``AgentEnd``).
        requests: every request the model received, in order (``ScriptedModel.requests``).
        context_before: the ``Context`` the run started from (its messages must keep the
            pairing invariant themselves).
        context: the very ``Context`` object passed to the run, to check it was left
            unchanged (compared with ``context_before`` through JSON text, so pass a
            copy made before the run as ``context_before``, or the same object when its
            messages cannot change).
        prompts: the prompts passed to the run; checked to be the first messages of any
            run that made a request.
        polled: every message the steering and follow-up polls returned, in the order
            they returned them. With ``prompts`` (give both), each of the prompts and
            then the polled messages must be delivered exactly once, in that order, or be
            in ``result.undelivered``.
        max_steps: the run's ``LoopConfig.max_steps``.
        requests_at_abort: how many requests the model had received when the run was
            aborted; no request may follow.
        context_swapped: the run's ``prepare_next_turn`` replaced the context, so the
            transcript need not extend ``context_before``.
        tool_execution: the run's ``LoopConfig.tool_execution``. The calls of a reply
            run in sequential mode when it is ``"sequential"``, or when one of them names
            a tool of ``context_before`` (or ``context``) whose ``execution_mode`` is
            ``"sequential"``; then each call's result message must come right after its
            ``ToolExecutionEnd``, whatever result the call got (ran, blocked, aborted,
            interrupted or skipped).
        resumed_from: for a run started by ``resume``, the deferral it answered (the
            ``deferral`` of the run it resumed): its first turn is that reply's, with no
            assistant message of its own, and ``context_before`` ends in that deferral.

    A run that ended ``deferred`` waits: its ``result.deferral`` calls have a
    ``ToolExecutionStart`` and neither an end nor a result, and the results it holds
    back have their ``ToolExecutionEnd`` but no result message yet; the final transcript
    is checked with them waiting (``check_transcript(..., waiting=...)``).

    Invariants: 1 pairing before every request and at the end; 2 exactly one
    ``AgentEnd``, last, and the ``MessageEnd`` events are ``result.messages``; 3 the
    caller's context unchanged; 4 ``steps`` = requests ≤ ``max_steps``, none after an
    abort; 5 per call: start, updates, end (with a ``duration`` exactly when its tool
    ran), nothing after, and in sequential mode the
    result message right after the end; 6 polled messages delivered
    exactly once, in order, or undelivered; 8 the transcript round-trips through JSON
    text. (7 needs the live run: see ``ScriptRun.check``.)

    Not a checkpoint; pure inspection.
    """
    problems = run_invariant_violations(
        result,
        events,
        requests,
        context_before,
        context=context,
        prompts=prompts,
        polled=polled,
        max_steps=max_steps,
        requests_at_abort=requests_at_abort,
        context_swapped=context_swapped,
        tool_execution=tool_execution,
        resumed_from=resumed_from,
    )
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        noun = "invariant" if len(problems) == 1 else "invariants"
        raise AssertionError(f"{len(problems)} run {noun} broken:\n{lines}")


def run_invariant_violations(
    result: AgentRunResult,
    events: Sequence[ev.AgentEvent],
    requests: Sequence[ModelRequest],
    context_before: Context,
    *,
    context: Context | None = None,
    prompts: Sequence[Message] | None = None,
    polled: Sequence[Message] | None = None,
    max_steps: int | None = None,
    requests_at_abort: int | None = None,
    context_swapped: bool = False,
    tool_execution: Literal["parallel", "sequential"] = "parallel",
    resumed_from: Deferral | None = None,
) -> list[str]:
    """The breaches :func:`assert_run_invariants` would report, as readable lines."""
    out: list[str] = []
    resumed = None if resumed_from is None else resumed_from.message
    _pairing(out, result, requests)
    _event_stream(out, result, events, resumed)
    _context(out, result, context_before, context, context_swapped)
    _steps(out, result, events, requests, max_steps, requests_at_abort, resumed is not None)
    _call_events(out, events, resumed_from, result.deferral)
    sequential_tools = {
        t.name
        for c in (context_before, context)
        if c is not None
        for t in c.tools
        if t.execution_mode == "sequential"
    }
    _sequential_order(
        out, events, tool_execution == "sequential", sequential_tools, resumed, result.deferral
    )
    _queues(out, result, events, prompts, polled)
    _round_trip(out, result)
    return out


def distinct_calls_view(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with each assistant message's repeated call ids dropped.

    The pairing invariant counts distinct ids: a reply that declares one id twice gets
    one result for it (the run then ends with an error), and ``check_transcript`` still
    lists the duplicate.
    Checking this view keeps exactly that one excused violation out.
    """
    out: list[Message] = []
    for m in messages:
        if type(m) is AssistantMessage and len({c.id for c in m.tool_calls}) < len(m.tool_calls):
            seen: set[str] = set()
            kept: list[object] = []
            for block in m.content:
                if type(block) is ToolCall:
                    if block.id in seen:
                        continue
                    seen.add(block.id)
                kept.append(block)
            m = attrs.evolve(m, content=tuple(kept))
        out.append(m)
    return out


# --- 1: pairing --------------------------------------------------------------------------


def _pairing(out: list[str], result: AgentRunResult, requests: Sequence[ModelRequest]) -> None:
    for i, request in enumerate(requests):
        for v in transcript_violations(distinct_calls_view(request.messages)):
            out.append(f"[1 pairing] request {i}: {v}")
    waiting = () if result.deferral is None else result.deferral.waiting_ids
    for v in transcript_violations(distinct_calls_view(result.transcript), waiting=waiting):
        out.append(f"[1 pairing] final transcript: {v}")


# --- 2: the event stream's shape --------------------------------------------------------


def _event_stream(
    out: list[str],
    result: AgentRunResult,
    events: Sequence[ev.AgentEvent],
    resumed: AssistantMessage | None = None,
) -> None:
    tag = "[2 events]"
    if not events:
        out.append(f"{tag} no event at all")
        return
    if type(events[0]) is not ev.AgentStart:
        out.append(f"{tag} first event is {type(events[0]).__name__}, not AgentStart")
    starts = sum(type(e) is ev.AgentStart for e in events)
    if starts != 1:
        out.append(f"{tag} {starts} AgentStart events")
    ends = [i for i, e in enumerate(events) if type(e) is ev.AgentEnd]
    if len(ends) != 1:
        out.append(f"{tag} {len(ends)} AgentEnd events (want exactly one)")
    if ends and ends[-1] != len(events) - 1:
        out.append(
            f"{tag} AgentEnd is event {ends[-1]} of {len(events)}; "
            f"{type(events[-1]).__name__} comes after it"
        )
    if ends:
        last = events[ends[-1]]
        assert type(last) is ev.AgentEnd
        if last.reason != result.reason:
            out.append(f"{tag} AgentEnd.reason {last.reason!r} != result.reason {result.reason!r}")
        if tuple(last.messages) != tuple(result.messages):
            out.append(f"{tag} AgentEnd.messages differ from result.messages")
    ended = [e.message for e in events if type(e) is ev.MessageEnd]
    if ended != list(result.messages):
        out.append(
            f"{tag} the MessageEnd events ({_roles(ended)}) are not result.messages "
            f"({_roles(result.messages)})"
        )

    # Turns and messages nest: TurnStart (MessageStart [MessageUpdate...] MessageEnd |
    # ToolExecution*)* TurnEnd, and nothing but AgentStart/AgentEnd outside a turn.
    in_turn = False
    in_message: Message | None = None
    turn_index = 0
    turn_messages: list[Message] = []
    for i, e in enumerate(events):
        if isinstance(e, ev.TurnStart):
            if in_turn:
                out.append(f"{tag} event {i}: TurnStart inside an open turn")
            if e.index != turn_index:
                out.append(f"{tag} event {i}: TurnStart.index {e.index}, expected {turn_index}")
            in_turn, turn_messages = True, []
            turn_index += 1
        elif isinstance(e, ev.TurnEnd):
            if not in_turn:
                out.append(f"{tag} event {i}: TurnEnd without a TurnStart")
            if in_message is not None:
                out.append(f"{tag} event {i}: TurnEnd while a message is open")
            first = resumed if turn_index == 1 else None
            _turn_end(out, i, e, turn_messages, first)
            in_turn = False
        elif isinstance(e, ev.RecordMarker):
            pass  # for a transcript writer: anywhere
        elif isinstance(e, ev.AgentStart | ev.AgentEnd):
            if in_turn:
                out.append(f"{tag} event {i}: {type(e).__name__} inside an open turn")
        else:
            if not in_turn:
                out.append(f"{tag} event {i}: {type(e).__name__} outside a turn")
            if isinstance(e, ev.MessageStart):
                if in_message is not None:
                    out.append(f"{tag} event {i}: MessageStart while a message is open")
                in_message = e.message
            elif isinstance(e, ev.MessageUpdate | ev.OutputUpdate):
                if in_message is None or type(in_message) is not AssistantMessage:
                    out.append(f"{tag} event {i}: {type(e).__name__} outside an assistant message")
            elif isinstance(e, ev.MessageEnd):
                if in_message is None:
                    out.append(f"{tag} event {i}: MessageEnd without a MessageStart")
                elif type(in_message) is not type(e.message):
                    out.append(
                        f"{tag} event {i}: MessageEnd of a {e.message.role} message "
                        f"closes a MessageStart of a {in_message.role} message"
                    )
                in_message = None
                turn_messages.append(e.message)
            elif in_message is not None:
                out.append(f"{tag} event {i}: {type(e).__name__} while a message is open")
    if in_turn:
        out.append(f"{tag} the last turn has no TurnEnd")


def _turn_end(
    out: list[str],
    i: int,
    end: ev.TurnEnd,
    turn_messages: Sequence[Message],
    resumed: AssistantMessage | None = None,
) -> None:
    tag = "[2 events]"
    replies = [m for m in turn_messages if type(m) is AssistantMessage]
    if len(replies) > 1:
        out.append(f"{tag} event {i}: a turn with {len(replies)} assistant messages")
    reply = replies[-1] if replies else None
    if reply is None and resumed is not None:  # a resumed run's first turn
        reply = resumed
        turn_messages = [resumed, *turn_messages]
    if end.message != reply:
        out.append(
            f"{tag} event {i}: TurnEnd.message is "
            f"{'None' if end.message is None else 'a reply'}, but the turn's reply is "
            f"{'None' if reply is None else 'a reply'}"
            if (end.message is None) != (reply is None)
            else f"{tag} event {i}: TurnEnd.message is not the turn's reply"
        )
    after = turn_messages[turn_messages.index(reply) + 1 :] if reply is not None else []
    results = [m for m in after if type(m) is ToolResultMessage]
    if tuple(end.tool_results) != tuple(results):
        out.append(
            f"{tag} event {i}: TurnEnd.tool_results ({len(end.tool_results)}) are not the "
            f"results that followed the reply ({len(results)})"
        )


# --- 3: the caller's context --------------------------------------------------------------


def _context(
    out: list[str],
    result: AgentRunResult,
    before: Context,
    context: Context | None,
    swapped: bool,
) -> None:
    tag = "[3 context]"
    if context is not None:
        if dumps(context.messages) != dumps(before.messages):
            out.append(f"{tag} the caller's context messages changed during the run")
        if context.system_prompt != before.system_prompt:
            out.append(f"{tag} the caller's system prompt changed during the run")
        if [t.name for t in context.tools] != [t.name for t in before.tools]:
            out.append(f"{tag} the caller's tools changed during the run")
    if not swapped:
        expected = (*before.messages, *result.messages)
        if tuple(result.transcript) != expected:
            out.append(
                f"{tag} result.transcript ({_roles(result.transcript)}) is not the context's "
                f"messages followed by result.messages ({_roles(expected)})"
            )


# --- 4: steps -----------------------------------------------------------------------------


def _steps(
    out: list[str],
    result: AgentRunResult,
    events: Sequence[ev.AgentEvent],
    requests: Sequence[ModelRequest],
    max_steps: int | None,
    requests_at_abort: int | None,
    resumed: bool = False,
) -> None:
    tag = "[4 steps]"
    if result.steps != len(requests):
        out.append(f"{tag} result.steps is {result.steps} but the model got {len(requests)}")
    if max_steps is not None and len(requests) > max_steps:
        out.append(f"{tag} {len(requests)} requests with max_steps={max_steps}")
    if requests_at_abort is not None and len(requests) > requests_at_abort:
        out.append(
            f"{tag} {len(requests) - requests_at_abort} request(s) after the abort "
            f"(the model had {requests_at_abort} when the run was aborted)"
        )
    answered = sum(1 for e in events if type(e) is ev.TurnEnd and e.message is not None)
    answered -= resumed and answered > 0  # a resumed run's first turn made no request
    if events and answered != result.steps:
        out.append(f"{tag} {answered} turns got a reply, but result.steps is {result.steps}")
    if result.reason == "max_steps" and max_steps is not None and result.steps != max_steps:
        out.append(f"{tag} ended max_steps after {result.steps} of {max_steps} steps")
    replies = [m.usage for m in result.messages if type(m) is AssistantMessage]
    if result.usage != sum(replies, Usage()):
        out.append(f"{tag} result.usage is {result.usage}, not the sum of the run's replies")


# --- 5: per-call events --------------------------------------------------------------------


_RAN: dict[str, bool] = {
    "timed_out": True,
    "not_found": False,
    "invalid_arguments": False,
    "blocked": False,
}
"""Whether a call that ended with this outcome ran its tool, so that its
``ToolExecutionEnd`` has a ``duration`` (the other outcomes may come either way: an
``ok`` result may be one a decision gave, the tool never running)."""


def _call_events(
    out: list[str],
    events: Sequence[ev.AgentEvent],
    resumed_from: Deferral | None = None,
    deferral: Deferral | None = None,
) -> None:
    tag = "[5 call events]"
    reply: AssistantMessage | None = None
    waiting = set() if deferral is None else {c.id for c in deferral.calls}
    turns = 0
    state: dict[str, str] = {}  # call id -> "started" / "ended", for the current turn
    ends: dict[str, ev.ToolExecutionEnd] = {}
    result_started = False
    # Calls started after a result message of their batch: a sequential batch finalizes
    # each call (result message included) before the next one starts.
    started_late: set[str] = set()
    for i, e in enumerate(events):
        if isinstance(e, ev.TurnStart):
            reply, state, ends, result_started = None, {}, {}, False
            started_late = set()
            turns += 1
            if turns == 1 and resumed_from is not None:
                # A resumed run's first turn answers the deferred reply's waiting calls
                # (the others were answered before it).
                reply = resumed_from.message
                state = {
                    c.id: "ended" for c in reply.tool_calls if c.id not in resumed_from.waiting_ids
                }
        elif isinstance(e, ev.MessageEnd) and type(e.message) is AssistantMessage:
            reply = e.message
        elif isinstance(e, ev.MessageStart) and type(e.message) is ToolResultMessage:
            result_started = True
        elif isinstance(e, ev.MessageEnd) and type(e.message) is ToolResultMessage:
            end = ends.get(e.message.tool_call_id)
            if end is None:
                out.append(
                    f"{tag} event {i}: result for call {e.message.tool_call_id!r} has no "
                    "ToolExecutionEnd before it"
                )
            elif end.result != e.message:
                out.append(
                    f"{tag} event {i}: call {e.message.tool_call_id!r}: the result message "
                    "differs from ToolExecutionEnd.result"
                )
        elif isinstance(e, ev.ToolExecutionStart | ev.ToolExecutionUpdate | ev.ToolExecutionEnd):
            cid = e.call_id
            name = type(e).__name__
            if reply is None or cid not in {c.id for c in reply.tool_calls}:
                out.append(f"{tag} event {i}: {name} for {cid!r}, not a call of this turn's reply")
                continue
            now = state.get(cid)
            if isinstance(e, ev.ToolExecutionStart):
                if now is not None:
                    out.append(f"{tag} event {i}: call {cid!r}: a second ToolExecutionStart")
                state[cid] = "started"
                if result_started:
                    started_late.add(cid)
            elif isinstance(e, ev.ToolExecutionUpdate):
                if now != "started":
                    where = "before its start" if now is None else "after its ToolExecutionEnd"
                    out.append(f"{tag} event {i}: call {cid!r}: ToolExecutionUpdate {where}")
            else:
                if now != "started":
                    what = "without a start" if now is None else "a second time"
                    out.append(f"{tag} event {i}: call {cid!r}: ToolExecutionEnd {what}")
                if result_started and cid not in started_late:
                    out.append(
                        f"{tag} event {i}: call {cid!r}: ToolExecutionEnd after the batch's "
                        "result messages began"
                    )
                state[cid] = "ended"
                ends[cid] = e
                if e.is_error != e.result.is_error:
                    out.append(f"{tag} event {i}: call {cid!r}: is_error differs from the result's")
                if e.outcome != "ok" and not e.is_error:
                    out.append(
                        f"{tag} event {i}: call {cid!r}: outcome {e.outcome!r} but not an error"
                    )
                if e.result.tool_call_id != cid:
                    out.append(f"{tag} event {i}: call {cid!r}: the result answers another id")
                ran = _RAN.get(e.outcome)
                if e.duration is not None and not e.duration >= 0:
                    out.append(f"{tag} event {i}: call {cid!r}: duration {e.duration!r}")
                elif ran is not None and (e.duration is not None) != ran:
                    had = "no duration" if ran else f"a duration ({e.duration!r})"
                    out.append(f"{tag} event {i}: call {cid!r}: outcome {e.outcome!r} with {had}")
        elif isinstance(e, ev.TurnEnd) and reply is not None:
            for call in reply.tool_calls:
                if call.id in waiting and state.get(call.id) == "started":
                    continue  # deferred: it waits, with no end
                if state.get(call.id) != "ended":
                    missing = "ToolExecutionStart" if call.id not in state else "ToolExecutionEnd"
                    out.append(f"{tag} call {call.id!r}: no {missing} before its turn ended")
                    state[call.id] = "ended"  # report once


def _sequential_order(
    out: list[str],
    events: Sequence[ev.AgentEvent],
    always: bool,
    sequential_tools: set[str],
    resumed: AssistantMessage | None = None,
    deferral: Deferral | None = None,
) -> None:
    """In sequential mode each call is finalized before the next starts: its result
    message (``MessageStart``, ``MessageEnd``) right after its ``ToolExecutionEnd``
    (but for the results a deferral holds back)."""

    def runs_sequentially(reply: AssistantMessage) -> bool:
        return always or any(c.name in sequential_tools for c in reply.tool_calls)

    held = set() if deferral is None else {r.tool_call_id for r in deferral.held}
    sequential = resumed is not None and runs_sequentially(resumed)
    for i, e in enumerate(events):
        if isinstance(e, ev.MessageEnd) and type(e.message) is AssistantMessage:
            sequential = runs_sequentially(e.message)
        elif sequential and isinstance(e, ev.ToolExecutionEnd) and e.call_id not in held:
            after = events[i + 1 : i + 3]
            if [type(x) for x in after] != [ev.MessageStart, ev.MessageEnd] or any(
                x.message != e.result  # type: ignore[union-attr]
                for x in after
            ):
                out.append(
                    f"[5 call events] event {i}: call {e.call_id!r} ({e.outcome}) in "
                    "sequential mode: its result message does not follow its "
                    "ToolExecutionEnd"
                )


# --- 6: queued messages ---------------------------------------------------------------------


def _queues(
    out: list[str],
    result: AgentRunResult,
    events: Sequence[ev.AgentEvent],
    prompts: Sequence[Message] | None,
    polled: Sequence[Message] | None,
) -> None:
    tag = "[6 queues]"
    if prompts is not None and result.steps > 0:
        head = tuple(result.messages[: len(prompts)])
        if head != tuple(prompts):
            out.append(f"{tag} the run made a request but did not start with its prompts")
    if polled is None:
        return
    # The run's pending messages are its prompts, then what the polls returned, in that
    # order; each enters the transcript once, in that order, or ends in `undelivered`.
    queued = [*(prompts or ()), *polled]
    queued_ids = {id(m) for m in queued}
    if len(queued_ids) != len(queued):
        out.append(f"{tag} the same message object was prompted or polled twice")
    delivered = [m for m in result.messages if id(m) in queued_ids]
    if len({id(m) for m in delivered}) != len(delivered):
        out.append(f"{tag} a polled message entered the transcript twice")
    undelivered = list(result.undelivered)
    strays = [m for m in undelivered if id(m) not in queued_ids]
    if strays:
        out.append(f"{tag} {len(strays)} undelivered message(s) no poll returned")
    got = [id(m) for m in (*delivered, *undelivered)]
    if got != [id(m) for m in queued]:
        lost = [m for m in queued if id(m) not in set(got)]
        if lost:
            out.append(
                f"{tag} {len(lost)} polled message(s) neither delivered nor undelivered: "
                f"{[_label(m) for m in lost]}"
            )
        else:
            out.append(
                f"{tag} polled messages out of order: polled {[_label(m) for m in queued]}, "
                f"delivered then undelivered "
                f"{[_label(m) for m in (*delivered, *undelivered)]}"
            )
    cut_short = ("aborted", "error", "max_steps", "usage_limit", "timeout")
    if events and result.undelivered and result.reason not in cut_short:
        # Only an end that cuts the run short may leave messages undelivered.
        out.append(
            f"{tag} {len(result.undelivered)} undelivered message(s) after a {result.reason!r} end"
        )


# --- 8: JSON round trip ---------------------------------------------------------------------


def _round_trip(out: list[str], result: AgentRunResult) -> None:
    tag = "[8 round trip]"
    try:
        text = dumps(result.transcript)
        back = loads(text)
    except (TranscriptFormatError, TypeError, ValueError) as exc:
        out.append(f"{tag} the transcript does not survive dumps/loads: {exc}")
        return
    if back != tuple(result.transcript):
        for i, (a, b) in enumerate(zip(back, result.transcript, strict=False)):
            if a != b:
                out.append(f"{tag} messages[{i}] differs after dumps/loads")
                break
        else:
            out.append(f"{tag} dumps/loads changed the number of messages")


# --- helpers --------------------------------------------------------------------------------


def _roles(messages: Sequence[Message]) -> str:
    return ", ".join(m.role for m in messages) or "none"


def _label(message: Message) -> str:
    content = getattr(message, "content", None)
    if isinstance(content, tuple):
        text = "".join(getattr(b, "text", "") for b in content)
        if text:
            return text
    return message.role
