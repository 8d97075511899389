"""Resuming a deferred run: what the transcript records of a deferral, and the plan that
answers every waiting call before the resumed run's first request (sans-IO).

Marker lines (see ``JsonlTranscript.write_marker``):

- ``deferral``, written right before the deferred run's ``AgentEnd``: the calls that
  wait (id, name, validated arguments, reason) and the results held back (the calls
  declared after the first deferred one that ran). The transcript file alone is enough
  to resume.
- ``decisions``, written by the resumed run before any approved call runs: each new
  decision, with the result a denied or given call gets.

Exactly once across a crash (a SIGKILL included): an approved call runs only after the
``decisions`` marker naming it is on disk. A resume that finds a ``decisions`` marker
approving a call that has no result does not run the call again — the process may have
stopped while it ran — and gives it an ``aborted`` error result saying so ("at most
once": never twice, and a call that may have half-run is reported, not retried). A
denied or given call recorded there gets the recorded result. Results already written
after the deferral are kept; the rest are appended, in declaration order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol

from ._deferral import Approve, Deferral, DeferredCall, Deny, Result
from ._errors import AgentUsageError, TranscriptFormatError
from ._inputs import result_content
from ._messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    make_result,
    result_message,
)
from ._serde import check_json, from_jsonable, to_jsonable

if TYPE_CHECKING:
    from . import _events as ev

__all__ = [
    "DECISIONS",
    "DEFERRAL",
    "INTERRUPTED_APPROVED",
    "MarkerLike",
    "OpenDeferral",
    "ResumePlan",
    "decided_result",
    "deferral_data",
    "open_deferral",
    "plan_resume",
    "waiting_in",
]

DEFERRAL: Final = "deferral"
"""The marker kind that records a deferral."""
DECISIONS: Final = "decisions"
"""The marker kind that records the decisions of a resume."""

INTERRUPTED_APPROVED: Final = (
    "Tool call interrupted: the process stopped after this call was approved and before "
    "its result was recorded; it is not run again."
)
"""The result of an approved call that a crash left without a result."""


DENIED: Final = "Tool call denied."
"""The result of a call denied without a reason."""


class MarkerLike(Protocol):
    """A marker line as ``load_transcript`` returns it (``Marker``)."""

    @property
    def kind(self) -> str: ...

    @property
    def data(self) -> Mapping[str, Any]: ...

    @property
    def at(self) -> int: ...


# --- the deferral marker ---------------------------------------------------------------------


def deferral_data(deferral: Deferral) -> dict[str, Any]:
    """The ``deferral`` marker's data: JSON that :func:`open_deferral` reads back."""
    return {
        "call_ids": [c.id for c in deferral.message.tool_calls],
        "calls": [
            {"id": c.id, "name": c.name, "arguments": dict(c.arguments), "reason": c.reason}
            for c in deferral.calls
        ],
        "held": [to_jsonable(r, ToolResultMessage) for r in deferral.held],
    }


def _bad(what: str) -> TranscriptFormatError:
    return TranscriptFormatError(f"a {DEFERRAL} marker: {what}")


def _read_deferral(data: Mapping[str, Any], messages: Sequence[Message]) -> Deferral:
    calls = data.get("calls")
    if not isinstance(calls, list) or not calls:
        raise _bad("'calls' is not a non-empty list")
    deferred: list[DeferredCall] = []
    for item in calls:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise _bad(f"a call is not an object with an 'id': {item!r:.80}")
        args, reason = item.get("arguments", {}), item.get("reason")
        if not isinstance(args, dict) or not (reason is None or isinstance(reason, str)):
            raise _bad(f"call {item['id']!r}: bad 'arguments' or 'reason'")
        deferred.append(
            DeferredCall(
                id=item["id"], name=str(item.get("name", "")), arguments=args, reason=reason
            )
        )
    held: tuple[ToolResultMessage, ...] = tuple(
        from_jsonable(r, ToolResultMessage, path="$.data.held") for r in data.get("held", [])
    )
    first = deferred[0].id
    for m in reversed(messages):
        if type(m) is AssistantMessage and any(c.id == first for c in m.tool_calls):
            return Deferral(message=m, calls=tuple(deferred), held=held)
    raise _bad(f"no assistant message declares the deferred call {first!r}")


def _recorded(data: Mapping[str, Any]) -> dict[str, tuple[str, ToolResultMessage | None]]:
    """A ``decisions`` marker: call id -> (decision, the recorded result or None)."""
    out: dict[str, tuple[str, ToolResultMessage | None]] = {}
    for cid, item in data.get("decisions", {}).items():
        kind = item.get("decision") if isinstance(item, dict) else None
        if kind not in ("approve", "deny", "result"):
            raise TranscriptFormatError(f"a {DECISIONS} marker: bad decision for {cid!r}")
        raw = item.get("result")
        out[cid] = (kind, None if raw is None else from_jsonable(raw, ToolResultMessage))
    return out


class OpenDeferral(NamedTuple):
    """The deferral a transcript waits on, and what a crashed resume recorded of it."""

    deferral: Deferral
    recorded: dict[str, tuple[str, ToolResultMessage | None]]
    answered: frozenset[str]
    """The reply's call ids that have a result in the messages."""


def open_deferral(
    messages: Sequence[Message], markers: Iterable[MarkerLike]
) -> OpenDeferral | None:
    """The last ``deferral`` marker of a transcript, when some call of its reply still
    has no result; else None (no deferral, or it was answered).

    Raises:
        TranscriptFormatError: the marker's data is malformed.
    """
    markers = list(markers)
    last = None
    for i, marker in enumerate(markers):
        if marker.kind == DEFERRAL:
            last = i
    if last is None:
        return None
    deferral = _read_deferral(markers[last].data, messages)
    recorded: dict[str, tuple[str, ToolResultMessage | None]] = {}
    for marker in markers[last + 1 :]:
        if marker.kind == DECISIONS:
            recorded.update(_recorded(marker.data))
    ids = {c.id for c in deferral.message.tool_calls}
    answered = frozenset(
        m.tool_call_id for m in messages if type(m) is ToolResultMessage and m.tool_call_id in ids
    )
    if ids <= answered:
        return None
    return OpenDeferral(deferral, recorded, answered)


def waiting_in(messages: Sequence[Message], markers: Iterable[MarkerLike]) -> frozenset[str]:
    """The call ids of a transcript that wait for a decision (no result yet, named by its
    open deferral): what ``check_transcript(..., waiting=...)`` accepts unanswered."""
    found = open_deferral(messages, markers)
    if found is None:
        return frozenset()
    return found.deferral.waiting_ids - found.answered


# --- the plan of a resume --------------------------------------------------------------------


class ResumePlan(NamedTuple):
    """How a resumed run answers the deferred reply, before its first request.

    ``calls``: the reply's calls without a result yet, in declaration order (each id
    once); ``presets``: the result (and outcome) of each that does not run — held back,
    denied, given, or interrupted by a crash; ``approved``: the arguments of each that
    runs now (validated again when it runs); ``record``: the ``decisions`` marker's data
    (None when no new decision is taken).
    """

    message: AssistantMessage
    calls: tuple[ToolCall, ...]
    presets: dict[str, tuple[ToolResultMessage, ev.ToolOutcome]]
    approved: dict[str, Mapping[str, Any]]
    record: dict[str, Any] | None


def decided_result(
    call: ToolCall, decision: Deny | Result
) -> tuple[ToolResultMessage, ev.ToolOutcome]:
    """The result (and outcome) a denied or given call gets, whoever decided: an
    ``approver`` while the run waited, or a resume.

    Raises:
        TypeError: a ``Result``'s content or details that a transcript cannot hold.
    """
    if isinstance(decision, Deny):
        return make_result(call, decision.reason or DENIED, is_error=True), "blocked"
    if decision.details is not None:
        check_json(decision.details, f"the details of Result for {call.id!r}")
    result = result_message(
        call,
        result_content(decision.content),
        is_error=decision.is_error,
        details=decision.details,
    )
    return result, _outcome(result)


def plan_resume(found: OpenDeferral, decisions: Mapping[str, object]) -> ResumePlan:
    """Check ``decisions`` against the open deferral and plan the answers.

    Every problem is reported at once, before anything runs.

    Raises:
        AgentUsageError: a decision for an id that is not a waiting call (unknown, held
            back: it ran already, or answered), one for a call a crashed resume decided
            already, or a waiting call with no decision.
        TypeError: a decision that is not ``Approve``, ``Deny`` or ``Result``, or a
            ``Result``'s content or details that a transcript cannot hold.
    """
    if not isinstance(decisions, Mapping):
        raise TypeError(
            f"decisions must be a mapping of call id to decision, not {decisions!r:.60}"
        )
    deferral, recorded, answered = found
    waiting = {c.id: c for c in deferral.calls}
    held = {r.tool_call_id: r for r in deferral.held}
    problems: list[str] = []
    for cid, decision in decisions.items():
        if not isinstance(decision, Approve | Deny | Result):
            raise TypeError(
                f"the decision for {cid!r} is {decision!r:.60}; expected Approve(), "
                "Deny(reason) or Result(content)"
            )
        if cid in answered:
            problems.append(f"call {cid!r} has its result already")
        elif cid in recorded:
            problems.append(f"call {cid!r} was decided already (a resume recorded it)")
        elif cid in held:
            problems.append(
                f"call {cid!r} ran already (its result is held until the rest are answered)"
            )
        elif cid not in waiting:
            problems.append(f"no deferred call has the id {cid!r}")
    missing = [
        cid
        for cid in waiting
        if cid not in answered and cid not in recorded and cid not in decisions
    ]
    if missing:
        problems.append("no decision for the deferred call(s) " + ", ".join(map(repr, missing)))
    if problems:
        known = ", ".join(repr(c) for c in waiting) or "(none)"
        raise AgentUsageError(
            "cannot resume: " + "; ".join(problems) + f" (the deferred calls: {known})"
        )
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for call in deferral.message.tool_calls:
        if call.id not in answered and call.id not in seen:
            seen.add(call.id)
            calls.append(call)
    presets: dict[str, tuple[ToolResultMessage, ev.ToolOutcome]] = {}
    approved: dict[str, Mapping[str, Any]] = {}
    record: dict[str, Any] = {}
    for call in calls:
        cid = call.id
        if cid in held:
            r = held[cid]
            presets[cid] = (r, "error" if r.is_error else "ok")
        elif cid in recorded:
            kind, result = recorded[cid]
            if kind == "approve" or result is None:
                presets[cid] = (make_result(call, INTERRUPTED_APPROVED, is_error=True), "aborted")
            else:
                presets[cid] = (result, "blocked" if kind == "deny" else _outcome(result))
        elif cid in decisions:
            decision = decisions[cid]
            if isinstance(decision, Approve):
                args = waiting[cid].arguments if decision.arguments is None else decision.arguments
                check_json(args, f"the arguments of Approve for {cid!r}")
                approved[cid] = args
                record[cid] = {"decision": "approve", "arguments": dict(args)}
                continue
            assert isinstance(decision, Deny | Result)
            presets[cid] = decided_result(call, decision)
            result = presets[cid][0]
            kind = "deny" if isinstance(decision, Deny) else "result"
            record[cid] = {"decision": kind, "result": to_jsonable(result, ToolResultMessage)}
        else:  # declared before the deferred calls, its result lost: never run here
            presets[cid] = (make_result(call, INTERRUPTED_APPROVED, is_error=True), "aborted")
    return ResumePlan(
        deferral.message, tuple(calls), presets, approved, {"decisions": record} if record else None
    )


def _outcome(result: ToolResultMessage) -> ev.ToolOutcome:
    return "error" if result.is_error else "ok"
