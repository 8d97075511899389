################################################################
# The turn machine: one run of the agent loop, sans-IO
################################################################
#
# Rule 1: everything that decides where a run goes lives here, in this file: the
# loop's steps and their order, the step and token limits, when the queues are polled,
# what a reply means, the interrupt, the abort, how the run ends and why. As much as
# possible as tables; what does not fit a table is code here all the same.
#
# Rule 2: this file never awaits and never imports trio. The driver
# (``_run._runner.Runner``) does the awaiting — it emits events, calls the hooks and
# polls, streams the reply, runs the batch, takes checkpoints — and tells the machine
# what came of it. Every method here is one synchronous step, so no cancel can stop
# one half-way: whatever checkpoint a cancel hits, :meth:`TurnMachine.close` finds the
# state whole, gives every unanswered call a result and builds the closing events.
#
#
# Theory of operation
# ===================
#
# A run is three small machines, each with one variable, plus its data (the working
# transcript, the messages it appended, the messages pending, the turn in progress):
#
# 1) The loop's position (``position``): which step of pi's two-level loop comes
#    next. ``next()`` walks the FLOW table from the position to the first step the
#    driver must perform, and returns it as an Ask:
#
#      position        ask                 then
#      --------------  ------------------  ---------------
#      begin           start (AgentStart)  begin_check
#      begin_check     check_abort         begin_poll
#      begin_poll      poll_steering       inner_loop
#      next_check      check_abort         next_prepare
#      next_prepare    prepare_next_turn   next_poll
#      next_poll       poll_steering       request_check     (only when nothing is pending)
#      request_check   check_abort         turn
#      turn            turn                after_turn
#      stop_hook       should_stop         turn_poll         (true: end "stopped")
#      turn_poll       poll_steering       inner_loop
#      follow_up       poll_follow_up      after_follow_up
#
#    A step whose hook is not set is passed over, and so is a check_abort right after
#    another (nothing ran in between). Four positions are branches, decided by the
#    state (BRANCHES below):
#
#      inner_loop       the model has results to answer or messages are pending:
#                       the first turn -> request_check, a later one -> limits;
#                       else -> follow_up
#      limits           steps = max_steps -> end "max_steps"; a token budget would be
#                       exceeded, or the cost budget is spent -> end "usage_limit";
#                       else -> next_check
#      after_turn       the reply ends the run (the reply table) -> end with its
#                       reason; else -> stop_hook
#      after_follow_up  messages pending -> inner_loop; else -> end (natural_end)
#
#    A check_abort is the driver's checkpoint: an abort cancelled the run's scope, so
#    the checkpoint raises and the run closes. No request is made without one right
#    before it, with nothing awaited in between.
#
# 2) The turn's phase (``phase``), moved by the driver through one method each:
#
#      between  -> open       open_turn()    TurnStart; the pending messages appended
#      open     -> streaming  start_reply()  the request goes out (the step counted)
#      streaming-> replied    end_reply()    the reply in the transcript, its decision made
#      replied  -> executing  start_batch()  its calls run
#      replied  -> answered   skip_calls()   its calls skipped (or it asks for none)
#      executing-> answered   end_batch()    every call has its result
#      answered -> between    end_turn()     TurnEnd
#
#    A turn cut short by an interrupt is resumed where it stands: ``next()`` asks for
#    "end_cut_turn" while a reply streams or a batch executes, and the driver finishes
#    the turn from there. close() ends a turn from any phase.
#
# 3) The interrupt (``interrupt``): none, pending (asked while nothing could be cut:
#    kept until the next steering poll, which delivers what it wanted; a batch that
#    starts first is cut at once; a request about to be sent takes the steering first)
#    or cutting (the driver cancelled the reply or batch in flight; the turn ends with
#    the reply kept, stop reason aborted, its calls skipped — or with the unfinished
#    calls of the batch skipped; then none). ON_INTERRUPT says what an interrupt does
#    in each phase; an interrupt once the run is aborting or ended does nothing.
#
# And the run's lifecycle (``lifecycle``), moved by abort() and close() only:
#
#      state      abort()    close()
#      ---------  ---------  -----------
#      running    aborting   ended
#      aborting   aborting   aborted
#      ended      aborted    (no change)
#      aborted    aborted    (no change)
#
# "ended": close() ran — the result is set, the closing events are owed or delivered.
# "aborted": ended, and an abort was asked, before the end or while the closing
# events went out (what is left of them goes out within ``cleanup_timeout``). It says
# how the run is being closed, not why it ended: that is the result's ``reason``.
#
# What a finished reply means is the reply table (REPLY_TABLE, decide): a row per
# stop reason and whether the reply asks for calls, plus the rows that need more than
# that (duplicate call ids, ``continue_after_length``, an interrupted reply, a request
# refused as too long for the context window — see ``overflowed``).
#
# Context overflow: an ``error`` reply saying the request was too long
# (``is_context_overflow``) enters the transcript like any error reply (providers never
# send an error reply back). With a context policy, and when the run's last request was
# not such a retry already, the loop goes on (OVERFLOW_RETRY): the next request asks the
# policy to compact harder (``overflow_retry``). Otherwise the run ends
# ``context_overflow`` (OVERFLOW_END, OVERFLOW_UNHANDLED).
#
# Results: one appender. Every result of a turn enters the transcript through this
# machine: a skipped call's at once; a batch's as each call settles in sequential
# mode (its result message right after its ToolExecutionEnd, as in pi), or all of
# them in declaration order once the batch is over in parallel mode (``settle`` and
# ``end_batch``). The batch reports each settled call and never appends.
#
# Deferral: a call that waits for a decision (its tool's ``approval``, or
# ``before_tool_call`` returned ``Defer``) gets no result. When the batch is over,
# ``end_batch`` appends the results of the calls declared before the first waiting one,
# holds back the rest (``Deferral.held``), and the turn's decision becomes DEFERRED: the
# run ends ``deferred`` with no further request, and close() leaves the waiting and held
# calls without a result (a run ended otherwise gives the held results back and skips
# the waiting calls). A resumed run (``plan``) goes from ``start`` to ``resume``:
# ``resume_turn`` reopens the deferred reply's turn, one batch answers every waiting and
# held call in declaration order, and the loop goes on from ``after_turn`` — so every
# waiting call is answered before the resumed run's first request.

"""The turn machine: every rule that decides where a run goes, sans-IO (see the
theory of operation in the comment above)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Final, Literal, NamedTuple, Protocol, TypeAlias

from . import _events as ev
from ._call_ids import CallIds
from ._config import NextTurn, TurnContext, trusted_context
from ._context import is_context_overflow
from ._deferral import Deferral, DeferredCall
from ._events import AgentRunResult
from ._messages import (
    NO_USAGE,
    AssistantMessage,
    CustomMessage,
    Text,
    UserMessage,
    make_result,
    sum_usage,
    total_cost,
)
from ._model import ModelRequest, ToolSpec
from ._output import NO_OUTPUT, AnswerStream, OutputFailure, answering_tool
from ._resumption import DECISIONS, DEFERRAL, deferral_data

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from ._config import Context, LoopConfig, MaybeAwaitable, Messages
    from ._messages import Message, StopReason, ToolCall, ToolResultMessage, Usage
    from ._model import Model, ModelOptions
    from ._output import OutputPlan, OutputRequest
    from ._resumption import ResumePlan
    from ._tools import Tool

    PollHook: TypeAlias = Callable[[], MaybeAwaitable[Messages]] | None

__all__ = [
    "TERMINATED",
    "AbortAct",
    "Ask",
    "BatchEnd",
    "Decision",
    "Interrupt",
    "Lifecycle",
    "Phase",
    "ToolIndex",
    "TurnMachine",
    "decide",
    "default_convert",
    "interrupted",
    "natural_end",
    "over_budget",
    "over_cost",
    "overflowed",
    "runs_sequentially",
]

# --- the three machines and the lifecycle --------------------------------------------------

Ask = Literal[
    "start",
    "check_abort",
    "poll_steering",
    "prepare_next_turn",
    "turn",
    "end_cut_turn",
    "should_stop",
    "poll_follow_up",
    "end",
    "resume",
]
"""What the driver is asked to do next (see the FLOW table): ``start`` emit
``AgentStart``; ``check_abort`` take a checkpoint (cancelling first if an abort waits);
``poll_steering``/``poll_follow_up`` call that poll and hand its messages to
:meth:`TurnMachine.polled`; ``prepare_next_turn``/``should_stop`` call that hook and
hand its answer back; ``turn`` run one turn (open it, call ``prepare_request`` and
hand its answer to :meth:`TurnMachine.apply_next_turn`, shape and send the request,
stream the reply, run or skip its calls, end it); ``end_cut_turn`` finish the turn an
interrupt cut short; ``end`` close the run with :attr:`TurnMachine.ending`; ``resume``
(a resumed run, right after ``start``) answer the deferred reply's calls
(:meth:`TurnMachine.resume_turn`, then finish that turn)."""

Position = Literal[
    "begin",
    "begin_check",
    "begin_poll",
    "inner_loop",
    "limits",
    "next_check",
    "next_prepare",
    "next_poll",
    "request_check",
    "turn",
    "after_turn",
    "stop_hook",
    "turn_poll",
    "follow_up",
    "after_follow_up",
    "end",
    "resume",
]

FLOW: Final[dict[Position, tuple[Ask, Position]]] = {
    "begin": ("start", "begin_check"),
    "begin_check": ("check_abort", "begin_poll"),
    "begin_poll": ("poll_steering", "inner_loop"),
    "next_check": ("check_abort", "next_prepare"),
    "next_prepare": ("prepare_next_turn", "next_poll"),
    "next_poll": ("poll_steering", "request_check"),
    "request_check": ("check_abort", "turn"),
    "turn": ("turn", "after_turn"),
    "stop_hook": ("should_stop", "turn_poll"),
    "turn_poll": ("poll_steering", "inner_loop"),
    "follow_up": ("poll_follow_up", "after_follow_up"),
    "resume": ("resume", "after_turn"),
}
"""The loop's fixed steps: position -> (what the driver does, the position after)."""

BRANCHES: Final[dict[Position, Position]] = {
    "inner_loop": "follow_up",
    "limits": "next_check",
    "after_turn": "stop_hook",
    "after_follow_up": "inner_loop",
}
"""The positions decided by the state (see the module comment), each with the way it
goes when the state does not turn it elsewhere (to another position or to the end)."""

OPTIONAL: Final[dict[Ask, str]] = {
    "prepare_next_turn": "prepare_next_turn",
    "should_stop": "should_stop_after_turn",
    "poll_follow_up": "get_follow_up_messages",
}
"""The steps passed over when their hook (the ``LoopConfig`` field, or the follow-up
poll the run was given) is not set: resolved out of the run's flow once, when it starts.
Where no steering hook is set a steering poll still ends a pending interrupt (it
delivers what the interrupt wanted: nothing), so it is resolved out only in a run
nobody can interrupt."""

Phase = Literal["between", "open", "streaming", "replied", "executing", "answered"]

Interrupt = Literal["none", "pending", "cutting"]

ON_INTERRUPT: Final[dict[Phase, Interrupt]] = {
    "between": "pending",
    "open": "pending",
    "streaming": "cutting",
    "replied": "pending",
    "executing": "cutting",
    "answered": "pending",
}
"""What an interrupt does in each phase of a running run: ``cutting`` — the driver
cancels the reply or the batch in flight; ``pending`` — kept for later (see the module
comment). A cut already under way stays as it is."""

Lifecycle = Literal["running", "aborting", "ended", "aborted"]

AbortAct = Literal["cancel", "grace", "bound_closing"]

ON_ABORT: Final[dict[Lifecycle, tuple[Lifecycle, AbortAct]]] = {
    "running": ("aborting", "cancel"),
    "aborting": ("aborting", "cancel"),
    "ended": ("aborted", "bound_closing"),
    "aborted": ("aborted", "bound_closing"),
}
"""abort(): the new lifecycle, and what the driver does: ``cancel`` the run's scope
(``grace`` instead — let the running calls finish within the grace — when a batch
executes and a grace was given); ``bound_closing``: the closing events go out within
``cleanup_timeout``."""

ON_CLOSE: Final[dict[Lifecycle, Lifecycle]] = {"running": "ended", "aborting": "aborted"}

# --- the reply table -------------------------------------------------------------------------


class Decision(NamedTuple):
    """What a finished reply means: ``execute`` run ``calls``; ``skip`` give each of
    ``calls`` a skipped result saying ``skip_why``; ``none`` nothing to answer. ``end``:
    the run ends right after this turn with that reason. ``continues``: the model has
    results to answer (another request follows)."""

    action: Literal["execute", "skip", "none"]
    calls: tuple[ToolCall, ...] = ()
    skip_why: str = ""
    end: ev.EndReason | None = None
    continues: bool = False


REPLY_TABLE: Final[dict[tuple[str, bool], Decision]] = {
    # (stop reason, asks for calls): what runs / why the calls are skipped / end / goes on
    ("tool_use", True): Decision("execute", continues=True),
    ("tool_use", False): Decision("none", end="error"),
    ("stop", False): Decision("none"),
    ("stop", True): Decision(
        "skip",
        skip_why="the model stopped (stop reason stop) without asking for tools",
        end="error",
    ),
    ("length", False): Decision("none", end="length"),
    ("length", True): Decision(
        "skip", skip_why="the reply was truncated (stop reason length)", end="length"
    ),
    ("error", False): Decision("none", end="error"),
    ("error", True): Decision("skip", skip_why="the model reported an error", end="error"),
    ("aborted", False): Decision("none", end="aborted"),
    ("aborted", True): Decision("skip", skip_why="the reply was aborted", end="aborted"),
}
"""What a finished reply means, by its stop reason and whether it asks for calls (the
calls are the reply's). The rows that need more than that:"""

DUPLICATE_IDS: Final = Decision(
    "skip", skip_why="the reply declared duplicate tool call ids ({ids})", end="error"
)
"""Before any other row: each distinct call (by id, first occurrence) is skipped and
the run ends ``error`` (``{ids}``: the duplicated ids, sorted)."""

LENGTH_CONTINUED: Final = Decision(
    "skip",
    skip_why="the reply was truncated (stop reason length); re-issue the call",
    continues=True,
)
"""``length`` with calls and ``continue_after_length``: skipped, and the loop goes on."""

INTERRUPTED: Final = Decision("skip", skip_why="interrupted by user")
"""An interrupted reply: kept (stop reason ``aborted``), each distinct call skipped,
and the run goes on — the steering poll delivers what interrupted it."""

DEFERRED: Final = Decision("none", end="deferred")
"""What a turn comes to when calls of its batch were deferred (the batch's other calls
ran): the run ends ``deferred``, with no further request."""

OVERFLOW_RETRY: Final = Decision(
    "skip",
    skip_why="the request was too long for the model's context window",
    continues=True,
)
"""A reply refused as too long, in a run with a context policy and no retry under way:
its calls (if any) skipped, and the loop goes on with a request the policy compacts
harder."""

OVERFLOW_END: Final = Decision(
    "skip",
    skip_why=(
        "the request was still too long for the model's context window after the "
        "context policy compacted it"
    ),
    end="context_overflow",
)
"""A reply refused as too long right after a retry: the run ends ``context_overflow``
(``skip_why`` opens the result's ``error_message``)."""

OVERFLOW_UNHANDLED: Final = OVERFLOW_END._replace(
    skip_why=(
        "the request was too long for the model's context window, and no context policy "
        "is set to compact it (LoopConfig.context)"
    )
)
"""A reply refused as too long in a run without a context policy."""


def overflowed(message: AssistantMessage, *, policy: bool, retried: bool) -> Decision | None:
    """What a reply refused as too long for the context window means (None: the reply
    is not such a refusal): OVERFLOW_RETRY when the run has a context ``policy`` and
    the request was not a retry already (``retried``), else the run ends
    ``context_overflow``."""
    if not is_context_overflow(message):
        return None
    row = OVERFLOW_UNHANDLED if not policy else OVERFLOW_END if retried else OVERFLOW_RETRY
    return row._replace(calls=_distinct(message.tool_calls))


TERMINATED: Final = Decision("execute")
"""What a turn comes to when its calls ran and every result set ``terminate``: no
further request, and if no steering or follow-up message comes, the run ends
``terminated`` (:func:`natural_end`). Recognised by identity."""


def _distinct(calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
    """``calls`` with each id once, at its first occurrence."""
    if len({call.id for call in calls}) == len(calls):
        return calls
    seen: set[str] = set()
    out = []
    for call in calls:
        if call.id not in seen:
            seen.add(call.id)
            out.append(call)
    return tuple(out)


def decide(message: AssistantMessage, *, continue_after_length: bool = False) -> Decision:
    """What a finished reply means: its row of the reply table, with its calls."""
    calls = message.tool_calls
    distinct = _distinct(calls)
    if len(distinct) != len(calls):
        # Counted once over the calls: linear, however many the reply declares.
        dupes = sorted(cid for cid, n in Counter(c.id for c in calls).items() if n > 1)
        return DUPLICATE_IDS._replace(
            calls=distinct, skip_why=DUPLICATE_IDS.skip_why.format(ids=", ".join(dupes))
        )
    if not calls:
        return REPLY_TABLE[message.stop_reason, False]
    if continue_after_length and message.stop_reason == "length":
        row = LENGTH_CONTINUED
    else:
        row = REPLY_TABLE[message.stop_reason, True]
    return Decision(row.action, calls, row.skip_why, row.end, row.continues)


def interrupted(message: AssistantMessage) -> Decision:
    """What an interrupted reply means (the INTERRUPTED row, with its distinct calls)."""
    calls = _distinct(message.tool_calls)
    if not calls:
        return Decision("none")
    return INTERRUPTED._replace(calls=calls)


def natural_end(last_reply: AssistantMessage | None, *, terminated: bool) -> ev.EndReason:
    """Why a run ends once nothing is left to answer and no follow-up came.

    ``aborted`` when the last reply was interrupted (stop reason ``aborted``),
    ``terminated`` when every result of the last batch set ``terminate``, else ``stop``.
    """
    if last_reply is not None and last_reply.stop_reason == "aborted":
        return "aborted"
    return "terminated" if terminated else "stop"


def over_budget(
    used: Usage,
    last_prompt_tokens: int,
    *,
    max_input_tokens: int | None,
    max_output_tokens: int | None,
) -> bool:
    """Whether the next request would go over a token budget, given the run's ``used``
    tokens so far and the prompt tokens of its last request.

    Input: the prompt tokens used so far (input plus cache read and write) plus
    ``last_prompt_tokens`` — the least the next request sends, since the transcript only
    grows — exceed ``max_input_tokens``. Output: the output tokens used so far have
    reached ``max_output_tokens``. None means no budget of that kind.
    """
    if max_input_tokens is not None and used.prompt_tokens + last_prompt_tokens > max_input_tokens:
        return True
    return max_output_tokens is not None and used.output_tokens >= max_output_tokens


def over_cost(messages: Sequence[Message], max_cost: float) -> bool:
    """Whether the replies among ``messages`` have spent ``max_cost`` USD, or one of
    them cannot be priced (see ``LoopConfig.max_cost``)."""
    cost = total_cost(messages)
    return cost is None or cost >= max_cost


class ToolIndex(NamedTuple):
    """A context's tools as a call looks them up: by name, and the names of those with
    ``execution_mode="sequential"`` (built once per context, not per batch)."""

    by_name: dict[str, Tool]
    sequential: frozenset[str]

    @classmethod
    def of(cls, tools: Sequence[Tool]) -> ToolIndex:
        return cls(
            {t.name: t for t in tools},
            frozenset(t.name for t in tools if t.execution_mode == "sequential"),
        )


def runs_sequentially(config: LoopConfig, tools: ToolIndex, calls: Iterable[ToolCall]) -> bool:
    """Whether the calls of one reply run in sequential mode: the config says so, or one
    of them names a tool with ``execution_mode="sequential"`` (as in pi)."""
    if config.tool_execution == "sequential":
        return True
    named = tools.sequential
    return bool(named) and any(call.name in named for call in calls)


INTERRUPTED_CALL: Final[tuple[ev.ToolOutcome, str]] = (
    "skipped",
    "Tool call skipped: interrupted by user.",
)
"""How a call an interrupt cut ends (outcome, text)."""
ABORTED_CALL: Final = "Tool call aborted: {reason}."
"""How a call that an abort (or the run's end) cut ends (outcome ``aborted``); the
reason is the first abort's, else "the run was aborted"."""
_ABORTED_PLAINLY: Final = ABORTED_CALL.format(reason="the run was aborted")


def default_convert(messages: Sequence[Message]) -> tuple[Message, ...]:
    """The messages a model sees by default: all but the ``CustomMessage``s."""
    return tuple(m for m in messages if type(m) is not CustomMessage)


# --- what the machine holds of the driver's objects ---------------------------------------


class Listener(Protocol):
    """Where the events go: the machine builds events only while it listens."""

    @property
    def listening(self) -> bool: ...


class Reply(Protocol):
    """The reply being streamed (``_run._stream.StreamAccumulator``)."""

    @property
    def final(self) -> AssistantMessage | None: ...

    start_emitted: bool

    def fail(self, reason: str, stop_reason: StopReason = "error") -> AssistantMessage: ...

    def finish(self) -> AssistantMessage: ...

    def empty(self) -> AssistantMessage: ...


class BatchEnd(NamedTuple):
    """What a batch hands over when it is over (``close``)."""

    events: list[ev.AgentEvent]
    """The events still owed: the stopped calls' start and end events (in sequential
    mode each call's end followed by its result message's start and end)."""
    results: list[ToolResultMessage]
    """Every call's result, in declaration order."""
    stats: ev.TurnStats
    terminate: bool
    """Every result set ``terminate`` (and there was at least one)."""
    deferred: tuple[DeferredCall, ...] = ()
    """The calls that wait for a decision (kept only when the batch ran to its end)."""
    split: int = 0
    """How many of ``results`` belong to calls declared before the first deferred call
    (all of them when none was deferred): the rest are held back while calls wait."""


class BatchRun(Protocol):
    """The batch being run (``_run._batch.Batch``)."""

    @property
    def sequential(self) -> bool: ...

    @property
    def deferring(self) -> bool:
        """A call of the batch was deferred (the results of later calls are held)."""
        ...

    def close(self, outcome: ev.ToolOutcome, text: str, *, keep_deferred: bool = ...) -> BatchEnd:
        """Give every call without a result the result (``outcome``, ``text``), each
        reported through ``settle``; hand over the rest. ``keep_deferred``: the deferred
        calls keep waiting (no result)."""
        ...


_NO_EVENTS: Final[tuple[ev.AgentEvent, ...]] = ()


def _execution(
    call: ToolCall, result: ToolResultMessage, outcome: ev.ToolOutcome
) -> tuple[ev.AgentEvent, ev.AgentEvent]:
    """The start and end events of a call the machine answers itself (never run)."""
    return (
        ev.ToolExecutionStart(call_id=call.id, tool_name=call.name, args=call.arguments),
        ev.ToolExecutionEnd(
            call_id=call.id,
            tool_name=call.name,
            result=result,
            is_error=result.is_error,
            outcome=outcome,
        ),
    )


_REPLY_CUT_BY_ABORT: Final = frozenset({"aborted", "timeout"})


Flow: TypeAlias = dict[Position, tuple[Ask | None, Position]]
"""FLOW and BRANCHES in one table, for the steps a run has: a branch's step is None."""


def _resolve_flow(unset: frozenset[Ask]) -> Flow:
    """FLOW and BRANCHES with the steps in ``unset`` (OPTIONAL: their hook is not set)
    resolved out."""

    def resolved(position: Position) -> Position:
        while position in FLOW and FLOW[position][0] in unset:
            position = FLOW[position][1]
        return position

    flow: Flow = {"end": ("end", "end")}
    for position, (ask, after) in FLOW.items():
        flow[position] = (ask, resolved(after))
    for position, way in BRANCHES.items():
        flow[position] = (None, resolved(way))
    return flow


_OPTIONAL_ORDER: Final[tuple[Ask, ...]] = (
    "prepare_next_turn",
    "should_stop",
    "poll_follow_up",
    "poll_steering",
)
"""The steps a run may pass over (OPTIONAL, and the steering poll of a run nobody can
interrupt), in the order of the flags that key ``_FLOWS``."""

_FLOWS: dict[tuple[bool, ...], Flow] = {}
"""The resolved flows, by which steps are resolved out (at most 16: built once each,
not per run — a thousand runs at once share one)."""


# --- the machine -----------------------------------------------------------------------------


class TurnMachine:
    """One run's state and every change to it (see the module comment).

    Slotted: a thousand runs at once each save the instance dictionary. A new attribute
    goes in ``__slots__``.

    Args:
        prompts: the messages to append first (checked by the caller).
        context: the caller's context (never mutated).
        model: what streams the replies (the machine only holds it: ``prepare_next_turn``
            may swap it).
        config: hooks and limits.
        listener: where the events go (see :class:`Listener`).
        polls: the steering and follow-up polls (the driver calls them).
        interruptible: whether anything may interrupt the run.
        trusted_polls: whether what the polls return was checked where it entered (the
            Agent's queues hold messages checked when queued): the driver then does not
            check it again.
        output: the structured output the run must end with (see "Structured output"
            below), or None.

    Structured output. Each request asks for the final answer in the mode the plan
    resolves for the model in use (a final-answer tool among the tools, the schema in
    the system prompt, or the provider's native structured output:
    ``ModelRequest.output``). When the reply is in (:meth:`end_reply`) and the reply
    table lets the run go on, the answer is judged (``_judge_output``): a valid one
    ends the run ``stop`` with the value; an invalid one is sent back — as the
    final-answer call's error result (tool mode; the call is always answered, so the
    transcript stays paired) or as a user message (text modes) — and the model asked
    again, up to the plan's retries; then the run ends ``output_invalid``. A
    final-answer call whose argument text was not a JSON object (kept as its
    ``raw_arguments``) is such an invalid answer: the JSON problem is sent back. In tool
    mode a reply that calls other tools and not the final one runs them as usual; the
    final call's siblings are skipped when the answer is accepted or the run ends,
    and run when the answer is sent back (the final call is then answered in the
    batch, by a tool that gives the errors back: outcome ``error``; answered alone,
    its outcome is ``invalid_arguments``).
    """

    __slots__ = (
        "_batch_index",
        "_checked",
        "_flow",
        "_tool_index",
        "_tool_specs",
        "abort_reason",
        "acc",
        "answer",
        "batch",
        "call_ids",
        "config",
        "context",
        "decision",
        "deferral",
        "ending",
        "final_answer",
        "follow_up_poll",
        "interrupt",
        "lifecycle",
        "listener",
        "llm_view",
        "model",
        "new_messages",
        "options",
        "output",
        "output_error",
        "output_failures",
        "output_mode",
        "output_value",
        "overflow_retry",
        "pending",
        "phase",
        "plan",
        "position",
        "result",
        "steering_poll",
        "steps",
        "timed_out",
        "transcript",
        "trusted_polls",
        "turn_index",
        "turn_message",
        "turn_results",
        "turn_stats",
        "turns",
        "usage_counted",
        "usage_so_far",
    )

    def __init__(
        self,
        prompts: Sequence[Message],
        context: Context,
        model: Model,
        config: LoopConfig,
        *,
        listener: Listener,
        polls: tuple[PollHook, PollHook],
        interruptible: bool = True,
        trusted_polls: bool = False,
        plan: ResumePlan | None = None,
        output: OutputPlan | None = None,
    ) -> None:
        self.config = config
        self.context = context
        self.model = model
        self.options: ModelOptions = config.model_options
        self.listener = listener
        self.steering_poll, self.follow_up_poll = polls
        self.trusted_polls = trusted_polls
        # Which OPTIONAL steps are resolved out (in _OPTIONAL_ORDER): a tuple of four
        # flags, not a set built per run.
        unset = (
            config.prepare_next_turn is None,
            config.should_stop_after_turn is None,
            self.follow_up_poll is None,
            self.steering_poll is None and not interruptible,
        )
        flow = _FLOWS.get(unset)
        if flow is None:
            flow = _FLOWS[unset] = _resolve_flow(
                frozenset(ask for ask, off in zip(_OPTIONAL_ORDER, unset, strict=True) if off)
            )
        self._flow = flow

        self.transcript: list[Message] = list(context.messages)
        # The transcript without CustomMessages, kept up to date as messages are
        # appended, so that the default request costs one tuple copy, not a filter pass
        # over the whole history every turn.
        self.llm_view: list[Message] = list(default_convert(self.transcript))
        self.new_messages: list[Message] = []
        # Every call id in the transcript, so that a reply reusing one gets a fresh id.
        self.call_ids = CallIds(self.transcript)
        # Prompts count as pending from the start: a run that ends before appending
        # them reports them in `undelivered`, like polled messages.
        self.pending: list[Message] = list(prompts)
        self._tool_specs: tuple[ToolSpec, ...] | None = None
        self._tool_index: ToolIndex | None = None

        self.position: Position = "begin"
        self._checked = False  # the last step asked was a check_abort
        self.ending: ev.EndReason = "stop"  # why the run ends, once next() asked "end"
        self.phase: Phase = "between"
        self.interrupt: Interrupt = "none"
        self.lifecycle: Lifecycle = "running"
        self.abort_reason: str | None = None  # the first abort's
        self.timed_out = False  # the run_timeout fired: the run ends "timeout"

        self.steps = 0
        self.turn_index = 0
        self.turn_message: AssistantMessage | None = None
        # The last reply's decision (None before the first): what the turn in progress
        # does with its calls, and after it whether the loop goes on.
        self.decision: Decision | None = None
        self.turn_results: list[ToolResultMessage] = []
        self.turn_stats = ev.NO_STATS
        self.turns: list[ev.TurnStats] = []
        self.acc: Reply | None = None
        self.batch: BatchRun | None = None
        # The next request is a retry after one refused as too long: the context policy
        # compacts harder; another refusal ends the run (see ``overflowed``).
        self.overflow_retry = False
        self.result: AgentRunResult | None = None
        # The usage of new_messages[:usage_counted], summed only when a token budget is
        # checked or the usage is read (nothing per reply on the hot path).
        self.usage_so_far = NO_USAGE
        self.usage_counted = 0
        # A resumed run: how it answers the deferred reply first (then None).
        self.plan = plan
        # The calls that wait, once a batch deferred some (the run then ends "deferred").
        self.deferral: Deferral | None = None
        # Structured output (None: the run asks for none): the mode of the request in
        # flight, the value once an answer was valid, the invalid answers so far.
        self.output = output
        self.output_mode: OutputRequest | None = None
        self.output_value: object = NO_OUTPUT
        self.output_failures = 0
        self.output_error: str | None = None
        # Follows the streaming answer for OutputUpdate events (None: no output asked).
        self.answer: AnswerStream | None = None
        # The turn's final-answer call: (its id, the text of its result, is it an error).
        self.final_answer: tuple[str, str, bool] | None = None
        # The batch's tools when the final-answer call is answered in it (else None).
        self._batch_index: ToolIndex | None = None

    # --- the loop ----------------------------------------------------------------------

    def next(self) -> Ask:
        """The next step the driver performs (see FLOW and the branches in the module
        comment). Moves the position past it."""
        if self.phase != "between":
            # Only an interrupt's cut leaves a turn in flight when the driver asks.
            assert self.phase == "streaming" or self.phase == "executing", self.phase
            return "end_cut_turn"
        flow = self._flow
        position = self.position
        while True:
            ask, after = flow[position]
            if ask is not None:
                if ask == "check_abort":
                    if self._checked:  # nothing ran since the last check
                        position = after
                        continue
                elif ask == "poll_steering":
                    if (position == "next_poll" and self.pending) or not self.steering_polled():
                        position = after
                        continue
                self.position = after
                if ask == "start" and self.plan is not None:
                    self.position = "resume"  # a resumed run answers the deferred calls
                self._checked = ask == "check_abort"
                return ask
            # A branch: `after` is its way on, unless the state turns it.
            decision = self.decision
            if position == "after_turn":
                assert decision is not None
                if decision.end is not None:
                    self.ending = decision.end
                    after = "end"
            elif position == "inner_loop":
                if decision is None or decision.continues or self.pending:
                    after = "limits" if self.turn_index else "request_check"
            elif position == "limits":
                config = self.config
                if self.steps >= config.max_steps:
                    self.ending = "max_steps"
                    after = "end"
                elif (
                    (config.max_input_tokens is not None or config.max_output_tokens is not None)
                    and self._over_budget()
                ) or (
                    config.max_cost is not None and over_cost(self.new_messages, config.max_cost)
                ):
                    self.ending = "usage_limit"
                    after = "end"
            elif not self.pending:  # after_follow_up
                self.ending = natural_end(self.turn_message, terminated=decision is TERMINATED)
                after = "end"
            position = after

    def steering_polled(self) -> bool:
        """A steering poll is due: it delivers what a pending interrupt wanted (the
        interrupt is over). Whether a steering hook is set, to call."""
        if self.interrupt == "pending":
            self.interrupt = "none"
        return self.steering_poll is not None

    def polled(self, messages: Sequence[Message]) -> None:
        """A poll returned ``messages`` (checked by the driver): they are pending."""
        self.pending.extend(messages)

    def stop_said(self, stop: bool) -> None:
        """``should_stop_after_turn`` answered ``stop``: true ends the run "stopped"."""
        if stop:
            self.ending = "stopped"
            self.position = "end"

    def apply_next_turn(self, nxt: NextTurn) -> None:
        """What ``prepare_next_turn`` (or ``prepare_request``, with the turn open) returned:
        the context, model or options for the rest of the run."""
        if nxt.context is not None:
            self.context = nxt.context
            self.transcript = list(nxt.context.messages)
            self.llm_view = list(default_convert(self.transcript))
            self.call_ids = CallIds(self.transcript)
            self._tool_specs = None
            self._tool_index = None
        if nxt.model is not None:
            self.model = nxt.model
        if nxt.options is not None:
            self.options = nxt.options

    # --- one turn ----------------------------------------------------------------------

    def open_turn(self) -> list[ev.AgentEvent]:
        """between -> open: the turn starts and the pending messages are appended.
        Returns the events (``TurnStart``, each message's start and end)."""
        self.phase = "open"
        self.turn_message = None
        self.turn_results = []
        self.turn_stats = ev.NO_STATS
        self.decision = None
        self.final_answer = None
        self._batch_index = None
        index = self.turn_index
        self.turn_index += 1
        events: list[ev.AgentEvent] = [ev.TurnStart(index=index)] if self.listener.listening else []
        return self._append_pending(events)

    def resume_turn(self) -> list[ev.AgentEvent]:
        """between -> replied, in a resumed run: the deferred reply's turn goes on, its
        calls without a result to be answered by a batch (the plan's). Returns its
        ``TurnStart`` and, when new decisions were taken, the ``decisions`` marker (to be
        on disk before an approved call runs)."""
        plan = self.plan
        assert plan is not None
        assert self.phase == "between"
        self.phase = "replied"
        self.turn_message = plan.message
        self.turn_results = []
        self.turn_stats = ev.NO_STATS
        self.decision = Decision("execute", plan.calls, continues=True)
        index = self.turn_index
        self.turn_index += 1
        events: list[ev.AgentEvent] = [ev.TurnStart(index=index)]
        if plan.record is not None:
            events.append(ev.RecordMarker(kind=DECISIONS, data=plan.record))
        return events

    def takes_steering_first(self) -> bool:
        """Whether the request about to be sent first takes the steering queue (an
        interrupt is pending: what it wanted goes out with this request)."""
        return self.interrupt == "pending"

    def take_pending(self) -> list[ev.AgentEvent]:
        """Append the pending messages; returns their events."""
        return self._append_pending([])

    def _append_pending(self, events: list[ev.AgentEvent]) -> list[ev.AgentEvent]:
        pending, self.pending = self.pending, []
        for message in pending:
            events.extend(self._append(message))
        return events

    def start_reply(self, messages: Sequence[Message], acc: Reply) -> ModelRequest:
        """open -> streaming: the request goes out (the step is counted), with
        ``messages`` as the model sees them; ``acc`` builds the reply."""
        assert self.phase == "open", self.phase
        self.steps += 1
        self.acc = acc
        self.phase = "streaming"
        specs = self._tool_specs
        if specs is None:
            specs = self._tool_specs = tuple(
                ToolSpec(name=t.name, description=t.description, parameters=t.parameters)
                for t in self.context.tools
            )
        system_prompt = self.context.system_prompt
        asked: OutputRequest | None = None
        plan = self.output
        if plan is not None:
            asked = self.output_mode = plan.request(plan.resolve(self.model))
            self.answer = AnswerStream(plan, asked)
            if asked.mode == "tool":
                specs = (
                    *specs,
                    ToolSpec(
                        name=asked.name, description=asked.description, parameters=asked.schema
                    ),
                )
            elif asked.mode == "prompted":
                extra = plan.instructions
                system_prompt = f"{system_prompt}\n\n{extra}" if system_prompt else extra
        return ModelRequest(
            system_prompt=system_prompt,
            messages=tuple(messages),
            tools=specs,
            options=self.options,
            output=asked,
        )

    def end_reply(self) -> Sequence[ev.AgentEvent]:
        """streaming -> replied: the reply — finished, failed, or cut by an interrupt
        (kept, stop reason ``aborted``) — enters the transcript and its decision is made.
        Returns its closing events."""
        acc = self.acc
        assert acc is not None
        cut = self.interrupt == "cutting"
        if cut:
            self.interrupt = "none"
            if acc.final is None:
                acc.fail("interrupted by user", "aborted")
        message = self.call_ids.fresh(acc.finish())
        # The reply enters the transcript in the same step as it stops being in
        # flight: a cancel at any later checkpoint finds it there.
        self.acc = None
        self._push(message)
        self.turn_message = message
        self.phase = "replied"
        if cut:
            self.decision = interrupted(message)
        else:
            overflow = overflowed(
                message, policy=self.config.context is not None, retried=self.overflow_retry
            )
            self.overflow_retry = overflow is not None and overflow.continues
            self.decision = (
                overflow
                if overflow is not None
                else decide(message, continue_after_length=self.config.continue_after_length)
            )
        listening = self.listener.listening
        closing: list[ev.AgentEvent] = []
        if listening:
            if not acc.start_emitted:
                acc.start_emitted = True
                closing.append(ev.MessageStart(message=acc.empty()))
            closing.append(ev.MessageEnd(message=message))
        if self.output is not None and not cut:
            self._judge_output(message, closing)
        return closing if listening else _NO_EVENTS

    def _judge_output(self, message: AssistantMessage, events: list[ev.AgentEvent]) -> None:
        """Judge the reply's answer, when the run asks for a structured output and the
        reply table lets the run go on (see "Structured output" in the class
        docstring): set the value, or send the answer back, or end ``output_invalid``.
        A retry message (text modes) enters the transcript now, its events to
        ``events``; the final-answer call's result enters with its siblings' results,
        in declaration order."""
        plan = self.output
        decision = self.decision
        asked = self.output_mode
        assert plan is not None
        assert decision is not None
        assert asked is not None
        if decision.end is not None or decision.action == "skip":
            return  # the reply table decided (an error, a cut, duplicate ids...)
        calls = decision.calls
        final = None
        failure: OutputFailure | None = None
        if asked.mode == "tool":
            final = next((c for c in calls if c.name == asked.name), None)
            if final is None and decision.action == "execute":
                return  # other tools run first; the answer comes later
            if final is None:
                failure = plan.missing_call()
            else:
                try:
                    self.output_value = plan.check_call(final)
                except OutputFailure as exc:
                    failure = exc
        elif decision.action != "none":
            return  # the reply asks for tools: they run, the answer comes later
        else:
            text = "".join(b.text for b in message.content if type(b) is Text)
            try:
                self.output_value = plan.check_text(text, strict=asked.mode == "native")
            except OutputFailure as exc:
                failure = exc
        last = failure is not None and self.output_failures >= plan.spec.retries
        if failure is not None:
            self.output_failures += 1
        if final is not None:
            if failure is None:
                said = "Final answer accepted."
            elif last:
                said = f"Final answer refused (no retries left): {'; '.join(failure.lines)}"
            else:
                said = plan.retry_text(failure, "tool")
            self.final_answer = (final.id, said, failure is not None)
        elif failure is not None and not last:
            retry = (
                plan.missing_call_text()
                if asked.mode == "tool"
                else plan.retry_text(failure, "text")
            )
            events.extend(self._append(UserMessage.text(retry)))
        if failure is None:
            self.decision = Decision("skip", calls, "the run ended with its final answer", "stop")
        elif last:
            self.output_error = (
                f"the output was still invalid after {plan.spec.retries} "
                f"retr{'y' if plan.spec.retries == 1 else 'ies'}: {'; '.join(failure.lines)}"
            )
            self.decision = Decision(
                "skip", calls, "the run ended (output_invalid)", end="output_invalid"
            )
        elif final is not None and len(calls) > 1:
            # The siblings run; the final call is answered in the batch by a tool that
            # gives the errors back, so every result keeps its place.
            answering = answering_tool(asked, self.final_answer[1])  # type: ignore[index]
            self._batch_index = ToolIndex.of((*self.context.tools, answering))
            self.decision = Decision("execute", calls, continues=True)
        else:
            self.decision = Decision("skip", calls, "", continues=True)

    @property
    def batch_tools(self) -> ToolIndex:
        """The tools the turn's batch looks its calls up in: the context's, and the
        final-answer call's when it is answered in the batch."""
        index = self._batch_index
        return index if index is not None else self.tools

    def skip_calls(self) -> list[ev.AgentEvent]:
        """replied -> answered, for a reply whose calls do not run: each gets its
        skipped result. Returns the events."""
        decision = self.decision
        assert decision is not None
        assert self.phase == "replied"
        events: list[ev.AgentEvent] = []
        self.turn_results.extend(self._skip(decision.calls, decision.skip_why, events))
        self.phase = "answered"
        return events

    def start_batch(self, batch: BatchRun) -> bool:
        """replied -> executing: ``batch`` runs the reply's calls. True when the driver
        must cut it at once (an interrupt was pending)."""
        assert self.phase == "replied"
        self.batch = batch
        self.phase = "executing"
        if self.interrupt == "pending":
            self.interrupt = "cutting"
            return True
        return False

    def settle(self, result: ToolResultMessage) -> Sequence[ev.AgentEvent]:
        """A call of the running batch has its result (the batch's one report of it).
        Sequential mode: the result enters the transcript now; returns its message's
        events, to go right after the call's ``ToolExecutionEnd``. Parallel mode:
        nothing yet (see :meth:`end_batch`)."""
        batch = self.batch
        assert batch is not None
        if batch.sequential and not batch.deferring:
            return self._append(result)
        return _NO_EVENTS

    def end_batch(self) -> list[ev.AgentEvent]:
        """executing -> answered: the batch is over (run to its end, or cut). Every call
        without a result gets one — skipped when an interrupt cut it, aborted otherwise
        — and the results not in the transcript yet enter it. Returns the events."""
        batch = self.batch
        assert batch is not None
        if self.lifecycle == "running" and self.interrupt == "cutting":
            end = batch.close(*INTERRUPTED_CALL)
        elif self.lifecycle == "running" and batch.deferring:
            # The batch ran to its end and deferred calls: they keep waiting.
            end = batch.close("aborted", _ABORTED_PLAINLY, keep_deferred=True)
        else:
            reason = self.abort_reason
            end = batch.close(
                "aborted", ABORTED_CALL.format(reason=reason) if reason else _ABORTED_PLAINLY
            )
        if self.interrupt == "cutting":
            self.interrupt = "none"
        events = end.events
        # Sequential mode appended each result as it settled, up to the first deferred
        # call; parallel mode appends them now. While calls wait, the results after the
        # first of them are held back (declaration order, once they are answered).
        results = end.results
        if end.deferred:
            assert self.turn_message is not None
            self.deferral = Deferral(
                message=self.turn_message, calls=end.deferred, held=tuple(results[end.split :])
            )
            self.decision = DEFERRED
            results = results[: end.split]
            appended = [] if batch.sequential else results
        elif batch.sequential:
            # A deferral that an abort or interrupt ended held back the results from its
            # first deferred call on: they enter now (the others entered as they settled).
            appended = results[end.split :] if batch.deferring else []
        else:
            appended = results
        for result in appended:
            events.extend(self._append(result))
        self.batch = None
        self.plan = None
        self.phase = "answered"
        self.turn_results.extend(results)
        self.turn_stats = end.stats
        if end.terminate:
            self.decision = TERMINATED  # no further request
        return events

    def end_turn(self) -> Sequence[ev.AgentEvent]:
        """answered -> between: the turn ends. Returns its ``TurnEnd``."""
        assert self.phase == "answered"
        assert self.turn_message is not None
        self.phase = "between"
        self.turns.append(self.turn_stats)
        if not self.listener.listening:
            return _NO_EVENTS
        return (
            ev.TurnEnd(
                message=self.turn_message,
                tool_results=tuple(self.turn_results),
                stats=self.turn_stats,
            ),
        )

    # --- control -------------------------------------------------------------------------

    def abort(self, reason: str | None, *, grace: bool) -> AbortAct:
        """Stop the run (ON_ABORT): what the driver does now. ``grace``: a grace period
        was given (it applies to a batch that executes)."""
        state = self.lifecycle
        self.lifecycle, act = ON_ABORT[state]
        if state == "running":
            self.abort_reason = reason
        if act == "cancel" and grace and self.phase == "executing":
            return "grace"
        return act

    def time_out(self, timeout: float) -> AbortAct:
        """The ``run_timeout`` fired: the run ends ``timeout``, cleaned up as an abort is
        (unfinished calls get ``aborted`` results saying the run timed out)."""
        self.timed_out = True
        return self.abort(f"the run timed out after {timeout:g}s (run_timeout)", grace=False)

    def request_interrupt(self) -> bool | None:
        """An interrupt (ON_INTERRUPT): None when the run is not running (aborting or
        ended: nothing to do), else whether the driver cancels the reply or batch in
        flight."""
        if self.lifecycle != "running":
            return None
        if self.interrupt == "cutting":
            return False  # a cut under way
        self.interrupt = ON_INTERRUPT[self.phase]
        return self.interrupt == "cutting"

    @property
    def ended(self) -> bool:
        """Whether the run ended (its result is set; closing events may still be going
        out)."""
        return self.lifecycle == "ended" or self.lifecycle == "aborted"

    # --- the end -------------------------------------------------------------------------

    def close(self, reason: ev.EndReason) -> list[ev.AgentEvent] | None:
        """End the run wherever it stands: pair every call, end the turn, set the result.
        Returns the closing events (None when the run had ended already)."""
        if self.ended:
            return None
        events: list[ev.AgentEvent] = []
        acc = self.acc
        if acc is not None:
            if acc.final is not None:
                message = acc.final
            elif reason in _REPLY_CUT_BY_ABORT:
                message = acc.fail(self.abort_reason or "the run was aborted", "aborted")
            else:
                message = acc.fail("the run failed while the reply streamed", "error")
            if not acc.start_emitted:
                events.append(ev.MessageStart(message=acc.empty()))
            message = self.call_ids.fresh(message)
            self._push(message)
            events.append(ev.MessageEnd(message=message))
            self.turn_message = message
            self.acc = None
        answered = {r.tool_call_id for r in self.turn_results}
        if self.batch is not None:
            events.extend(self.end_batch())
            answered.update(r.tool_call_id for r in self.turn_results)
        self.lifecycle = ON_CLOSE[self.lifecycle]
        if self.turn_message is not None:
            if reason == "timeout" and self.abort_reason:
                why = self.abort_reason
            elif reason != "aborted":
                why = f"the run ended ({reason})"
            elif self.abort_reason:
                why = f"the run was aborted ({self.abort_reason})"
            else:
                why = "the run was aborted"
            deferral = self.deferral
            if deferral is not None and reason == "deferred":
                answered.update(deferral.waiting_ids)  # they wait: no result
            elif deferral is not None:
                # Ended otherwise after its batch deferred calls: the held results enter
                # (the calls ran) and the waiting calls are skipped, in declaration order.
                self.deferral = None
                held = {r.tool_call_id: r for r in deferral.held}
                for call in self.turn_message.tool_calls:
                    if call.id in answered:
                        continue
                    answered.add(call.id)
                    if call.id in held:
                        self.turn_results.append(held[call.id])
                        events.extend(self._append(held[call.id]))
                    else:
                        self.turn_results.extend(self._skip((call,), why, events))
            unanswered: list[ToolCall] = []
            for call in self.turn_message.tool_calls:
                if call.id not in answered:
                    answered.add(call.id)
                    unanswered.append(call)
            self.turn_results.extend(self._skip(unanswered, why, events))
        if self.phase != "between":
            self.phase = "between"
            self.turns.append(self.turn_stats)
            events.append(
                ev.TurnEnd(
                    message=self.turn_message,
                    tool_results=tuple(self.turn_results),
                    stats=self.turn_stats,
                )
            )
        last = self.new_messages[-1] if self.new_messages else None
        error_message = (
            last.error_message
            if type(last) is AssistantMessage and last.stop_reason == "error"
            else None
        )
        if reason == "context_overflow" and self.decision is not None:
            error_message = f"{self.decision.skip_why}: {error_message}"
        if reason == "output_invalid":
            error_message = self.output_error
        self.result = AgentRunResult(
            reason=reason,
            messages=tuple(self.new_messages),
            steps=self.steps,
            transcript=tuple(self.transcript),
            undelivered=tuple(self.pending),
            turns=tuple(self.turns),
            error_message=error_message,
            usage=self.usage,
            deferral=self.deferral if reason == "deferred" else None,
            output=None if self.output is None else self.output_value,
        )
        if reason == "deferred" and self.deferral is not None:
            events.append(ev.RecordMarker(kind=DEFERRAL, data=deferral_data(self.deferral)))
        self.pending = []
        self.position = "end"
        events.append(ev.AgentEnd(reason=reason, messages=self.result.messages))
        return events

    # --- the transcript ------------------------------------------------------------------

    def _push(self, message: Message) -> None:
        self.transcript.append(message)
        self.new_messages.append(message)
        if type(message) is not CustomMessage:
            self.llm_view.append(message)

    def _append(self, message: Message) -> list[ev.AgentEvent]:
        self._push(message)
        if not self.listener.listening:
            return []
        return [ev.MessageStart(message=message), ev.MessageEnd(message=message)]

    def _skip(
        self, calls: Sequence[ToolCall], why: str, events: list[ev.AgentEvent]
    ) -> list[ToolResultMessage]:
        """Give each of ``calls`` (of the turn's reply, never run) a skipped result and
        append it; the events go to ``events``. In sequential mode (decided on all the
        reply's calls, as for a batch) each call is finalized before the next starts, as
        in a sequential batch (its end, then its result message); in parallel mode every
        start and end comes first, then the result messages."""
        reply = self.turn_message
        assert reply is not None
        sequential = bool(calls) and runs_sequentially(self.config, self.tools, reply.tool_calls)
        listening = self.listener.listening
        results: list[ToolResultMessage] = []
        final = self.final_answer
        for call in calls:
            outcome: ev.ToolOutcome = "skipped"
            if final is not None and call.id == final[0]:
                # The final-answer call is answered, not skipped (accepted, or its errors).
                result = make_result(call, final[1], is_error=final[2])
                outcome = "invalid_arguments" if final[2] else "ok"
            else:
                result = make_result(call, f"Tool call skipped: {why}.", is_error=True)
            results.append(result)
            if listening:
                events.extend(_execution(call, result, outcome))
            if sequential:
                events.extend(self._append(result))
        if not sequential:
            for result in results:
                events.extend(self._append(result))
        return results

    # --- views of the state --------------------------------------------------------------

    @property
    def tools(self) -> ToolIndex:
        """The context's tools, indexed (once per context)."""
        index = self._tool_index
        if index is None:
            index = self._tool_index = ToolIndex.of(self.context.tools)
        return index

    @property
    def usage(self) -> Usage:
        """The token counts of the replies this run appended so far, summed."""
        new = self.new_messages
        if self.usage_counted < len(new):
            self.usage_so_far = self.usage_so_far + sum_usage(new[self.usage_counted :])
            self.usage_counted = len(new)
        return self.usage_so_far

    def _over_budget(self) -> bool:
        """Whether the next request would go over a token budget (:func:`over_budget`)."""
        config = self.config
        last = self.turn_message.usage.prompt_tokens if self.turn_message else 0
        return over_budget(
            self.usage,
            last,
            max_input_tokens=config.max_input_tokens,
            max_output_tokens=config.max_output_tokens,
        )

    def context_now(self) -> Context:
        """The conversation as it stands."""
        return trusted_context(
            self.context.system_prompt, tuple(self.transcript), self.context.tools
        )

    def turn_context(self) -> TurnContext:
        """What the turn hooks see (after a turn)."""
        assert self.turn_message is not None
        return TurnContext(
            message=self.turn_message,
            tool_results=tuple(self.turn_results),
            context=self.context_now(),
            new_messages=tuple(self.new_messages),
        )
