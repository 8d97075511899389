"""Hypothesis strategies for whole scripts, built from one small strategy per family.

Theory of operation
-------------------
A :class:`~trio_agent.testing.Script` is drawn part by part: the calls of a reply
(:func:`call_scripts`), the replies (:func:`reply_scripts`), the history the run starts
from (:func:`starts`), the queued messages (:func:`arrival_plans`), the abort
(:func:`abort_scripts`), the interrupts (:func:`interrupt_plans`), the outer deadline, the
failing run-level hook (:func:`hook_failures`) and the ``LoopConfig`` limits
(:func:`limit_settings`). Each is a strategy of its own, drawn with the others by
:func:`scripts`; each of ``scripts()``'s boolean options only swaps one family's strategy
for its plain default (``st.just(None)``, ``st.just(())``...).

Rare cases are drawn with :func:`_chance` — an integer compared with a threshold — so
that shrinking (toward 0) moves toward the plain case: a ``tool_use`` reply, a call that
answers at once, no abort. A shrunk script reads as a small scenario.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, get_args

import attrs
from hypothesis import strategies as st

from .._core import StopReason, as_tools
from ._argument_strategies import tool_arguments
from ._script import Script
from ._script_values import (
    SERIAL_TOOL,
    WORK_TOOL,
    AbortScript,
    Arrival,
    Behaviour,
    CallHook,
    CallScript,
    HookFailure,
    InterruptScript,
    QueueMode,
    QueueName,
    ReplyScript,
    RunHook,
    StreamFault,
    paired_history,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._core import Message, Tool

__all__ = [
    "STOP_REASONS",
    "abort_scripts",
    "arrival_plans",
    "call_scripts",
    "hook_failures",
    "interrupt_plans",
    "limit_settings",
    "reply_scripts",
    "scripts",
    "starts",
]

STOP_REASONS: tuple[StopReason, ...] = get_args(StopReason)
CALL_HOOKS: tuple[CallHook, ...] = get_args(CallHook)
RUN_HOOKS: tuple[RunHook, ...] = get_args(RunHook)

# Virtual seconds: a few distinct values, so that ties (two things at the same instant)
# are common and shrunk examples read well.
_TIMES = (0.0, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0)
_TIMEOUTS = (0.5, 1.0, 0.1, 3.0)  # tool_timeout values
_DEADLINES = (0.5, 0.05, 0.1, 0.25, 1.0, 2.0, 5.0)


_PERCENT = st.integers(0, 99)


def _chance(draw: st.DrawFn, percent: int) -> bool:
    """True about ``percent`` % of the time; shrinks toward False (the plain case)."""
    return draw(_PERCENT) >= 100 - percent


def _sometimes(
    draw: st.DrawFn, percent: int, strategy: st.SearchStrategy[Any], default: Any = None
) -> Any:
    """A draw from ``strategy`` about ``percent`` % of the time, else ``default`` (what
    it shrinks to). A draw-time helper rather than a ``flatmap``: it keeps drawing a
    script about as fast as one big composite."""
    return draw(strategy) if _chance(draw, percent) else default


def call_scripts(
    *,
    tools: Sequence[str] = (WORK_TOOL,),
    behaviours: Sequence[Behaviour] = ("ok",),
    own_tools: Sequence[Tool] = (),
    invalid_arguments: bool = True,
    progress: bool = True,
    hooks: bool = True,
) -> st.SearchStrategy[CallScript]:
    """One call (id ``"0"``: :func:`reply_scripts` numbers them): to a scripted tool (a
    name of ``tools``, doing one of ``behaviours``), or — three times in four when there
    are ``own_tools`` — to one of the user's own tools, with arguments drawn from its schema
    (one in ten invalid when ``invalid_arguments``)."""
    scripted = st.sampled_from(list(tools))
    doing = st.sampled_from(list(behaviours))
    mine = st.sampled_from(list(own_tools)) if own_tools else None
    call_hooks = st.sampled_from(CALL_HOOKS)

    @st.composite
    def build(draw: st.DrawFn) -> CallScript:
        hook: CallHook | None = _sometimes(draw, 8, call_hooks) if hooks else None
        valid = not (invalid_arguments and _chance(draw, 10))
        # Three calls in four go to the user's tools when there are some; shrinking
        # moves toward them (the tools under test), not toward the scripted ones.
        if mine is not None and draw(_PERCENT) < 75:
            tool = draw(mine)
            args = draw(tool_arguments(tool, valid=valid), label=f"{tool.name} arguments")
            return CallScript(id="0", tool=tool.name, valid_arguments=valid, args=args, hook=hook)
        return CallScript(
            id="0",
            tool=draw(scripted),
            valid_arguments=valid,
            latency=draw(st.sampled_from(_TIMES)),
            progress=_sometimes(draw, 40, st.integers(0, 3), 0) if progress else 0,
            behaviour=draw(doing),
            hook=hook,
        )

    return build()


def reply_scripts(
    *,
    calls: st.SearchStrategy[CallScript],
    last: bool = False,
    stop_reasons: Sequence[StopReason] = STOP_REASONS,
    max_calls: int = 4,
    duplicate_ids: bool = True,
    stream_faults: bool = True,
    stream_latency: bool = True,
) -> st.SearchStrategy[ReplyScript]:
    """One reply: mostly a healthy conversation — ``tool_use`` replies, then a final
    ``stop`` (when ``last``) — so runs go several turns deep; any other reason is the
    rare branch. Its calls come from ``calls``, numbered ``"0"``, ``"1"``... in order
    (with ``duplicate_ids``, a call may repeat an earlier one's id)."""
    # Weighted toward tool_use among the rare picks too.
    reasons: list[StopReason] = [
        r for r in ("tool_use", "tool_use", "tool_use", "stop", "stop") if r in stop_reasons
    ]
    reasons += [r for r in STOP_REASONS if r in stop_reasons and r not in ("tool_use", "stop")]
    rare = st.sampled_from(reasons)

    @st.composite
    def build(draw: st.DrawFn) -> ReplyScript:
        usual: StopReason = "stop" if last else "tool_use"
        if usual in stop_reasons and not _chance(draw, 20):
            reason = usual
        else:
            reason = draw(rare)
        if max_calls == 0:
            n_calls = 0
        elif reason == "tool_use":
            # A tool_use reply with no call is a model error: rare.
            n_calls = 0 if _chance(draw, 2) else draw(st.integers(1, max_calls))
        else:
            # Calls in a stop reply are a model error; in the others, a normal sight.
            with_calls = _chance(draw, 10 if reason == "stop" else 50)
            n_calls = draw(st.integers(1, max_calls)) if with_calls else 0
        out: list[CallScript] = []
        for k in range(n_calls):
            if duplicate_ids and k and _chance(draw, 3):
                cid = out[draw(st.integers(0, k - 1))].id
            else:
                cid = str(k)
            out.append(attrs.evolve(draw(calls), id=cid))
        fault: StreamFault | None = None
        if stream_faults:
            fault = _sometimes(draw, 4, st.sampled_from(["truncated", "raises"]))
        return ReplyScript(
            stop_reason=reason,
            calls=tuple(out),
            text=draw(st.sampled_from(["", "Let me see.", "Done!"])),
            latency=_sometimes(draw, 40, st.sampled_from(_TIMES), 0.0) if stream_latency else 0.0,
            fault=fault,
        )

    return build()


def _numbered(reply: ReplyScript, step: int) -> ReplyScript:
    """``reply`` with its call ids made unique across the script: ``c<step>.<k>``."""
    if not reply.calls:
        return reply
    return attrs.evolve(
        reply, calls=tuple(attrs.evolve(c, id=f"c{step}.{c.id}") for c in reply.calls)
    )


def starts() -> st.SearchStrategy[tuple[str | None, tuple[Message, ...]]]:
    """``(prompt, history)``: a fresh prompt (the plain case), or one after a paired
    history, or no prompt at all, continuing a history that ends in a question or in
    tool results."""

    @st.composite
    def build(draw: st.DrawFn) -> tuple[str | None, tuple[Message, ...]]:
        shape = draw(st.sampled_from(["none", "chat", "tools", "continue", "resume"]))
        if shape == "chat":
            return "go", paired_history(with_tools=False, pending="none")
        if shape == "tools":
            return "go", paired_history(with_tools=True, pending="none")
        if shape in ("continue", "resume"):
            pending: Literal["user", "results"] = "user" if shape == "continue" else "results"
            prompt = draw(st.sampled_from([None, "go"]))
            return prompt, paired_history(with_tools=True, pending=pending)
        return "go", ()

    return build()


def arrival_plans() -> st.SearchStrategy[tuple[tuple[Arrival, ...], QueueMode, QueueMode]]:
    """``(arrivals, steering_mode, follow_up_mode)``: one to three steering or follow-up
    messages queued at given times, and how many messages one poll takes."""
    queue_names: list[QueueName] = ["steer", "follow_up"]
    modes: list[QueueMode] = ["one_at_a_time", "all"]

    @st.composite
    def build(draw: st.DrawFn) -> tuple[tuple[Arrival, ...], QueueMode, QueueMode]:
        kinds = draw(st.lists(st.sampled_from(queue_names), min_size=1, max_size=3))
        queued = tuple(
            Arrival(
                at=draw(st.sampled_from(_TIMES)),
                queue=kind,
                text=f"{'steer' if kind == 'steer' else 'follow-up'} {i}",
            )
            for i, kind in enumerate(kinds)
        )
        return queued, draw(st.sampled_from(modes)), draw(st.sampled_from(modes))

    return build()


def abort_scripts() -> st.SearchStrategy[AbortScript]:
    """An abort at a time or at an event, with a grace period three times in ten."""

    @st.composite
    def build(draw: st.DrawFn) -> AbortScript:
        grace = _sometimes(draw, 30, st.sampled_from([0.1, 0.5]))
        if draw(st.booleans()):
            return AbortScript(at_time=draw(st.sampled_from(_TIMES)), grace=grace)
        return AbortScript(after_event=draw(st.integers(0, 60)), grace=grace)

    return build()


def interrupt_plans() -> st.SearchStrategy[tuple[InterruptScript, ...]]:
    """One or two ``run.interrupt()`` calls, each at a time or at an event."""
    one = st.one_of(
        st.builds(InterruptScript, at_time=st.sampled_from(_TIMES)),
        st.builds(InterruptScript, after_event=st.integers(0, 40)),
    )
    return st.lists(one, min_size=1, max_size=2).map(tuple)


def hook_failures() -> st.SearchStrategy[HookFailure]:
    """A run-level hook that raises on one of its first four calls."""
    return st.builds(HookFailure, hook=st.sampled_from(RUN_HOOKS), at=st.integers(0, 3))


def limit_settings() -> st.SearchStrategy[dict[str, Any]]:
    """``LoopConfig`` limits: ``max_steps``, sequential execution, ``max_concurrency``,
    ``continue_after_length``, ``max_output_tokens``, ``run_timeout`` (as ``Script``
    keyword arguments)."""
    return st.fixed_dictionaries(
        {
            "max_steps": st.sampled_from([32, 1, 2, 3, 5]),
            "tool_execution": st.sampled_from(["parallel", "sequential"]),
            "max_concurrency": st.none() | st.integers(1, 3),
            "continue_after_length": st.booleans(),
            "max_output_tokens": st.none() | st.sampled_from([10, 25]),
            "run_timeout": st.none() | st.sampled_from(_DEADLINES),
        }
    )


def scripts(
    *,
    max_replies: int = 5,
    max_calls: int = 4,
    stop_reasons: Sequence[StopReason] = STOP_REASONS,
    tools: Sequence[Tool] = (),
    duplicate_ids: bool = True,
    unknown_tools: bool = True,
    invalid_arguments: bool = True,
    failures: bool = True,
    timeouts: bool = True,
    progress: bool = True,
    stream_faults: bool = True,
    stream_latency: bool = True,
    arrivals: bool = True,
    aborts: bool = True,
    interrupt: bool = True,
    deadlines: bool = True,
    history: bool = True,
    limits: bool = True,
    hooks: bool = True,
    drivers: Sequence[Literal["channel", "callback"]] = ("channel", "callback"),
) -> st.SearchStrategy[Script]:
    """Whole scenarios for one run (:class:`~trio_agent.testing.Script`).

    Drawn from one small strategy per family (see this module's docstring); each
    boolean option switches one family on or off (all on by default). Run a drawn
    script with ``await script.run()`` under an autojump clock, then ``.check()``.

    Args:
        max_replies: the most scripted replies (the model errors once they run out).
        max_calls: the most tool calls in one reply.
        stop_reasons: the replies' stop reasons (``tool_use`` is the most common).
        tools: your own :class:`~trio_agent.Tool` objects (``@trio_agent.tool``
            functions included). About three calls in four then go to them, with arguments
            drawn from each tool's JSON Schema (see :func:`tool_arguments`): mostly
            valid, so their real bodies run; one in ten invalid (when
            ``invalid_arguments``), which the loop must answer with an error result.
            Names must differ from the scripted tools' ``work`` and ``serial``.
        duplicate_ids: a reply may declare one call id twice.
        unknown_tools: a call may name a tool that does not exist.
        invalid_arguments: a call's arguments may fail the schema.
        failures: a scripted tool may raise, ask to terminate, or hang (hangs only with a
            timeout).
        timeouts: ``tool_timeout`` may be set.
        progress: scripted tools may report progress.
        stream_faults: a stream may end without ``Done``, or the provider may raise.
        stream_latency: a stream may stay in flight for a while.
        arrivals: steering and follow-up messages may be queued during the run.
        aborts: the run may be aborted at an event or a time, with or without grace.
        interrupt: ``run.interrupt()`` may cut the running batch or reply (the run goes
            on; what ``steer(..., interrupt=True)`` does).
        deadlines: an outer cancel scope may have a deadline.
        history: the run may start from earlier messages (or continue with no prompt).
        limits: ``max_steps``, ``max_concurrency``, sequential execution,
            ``continue_after_length`` and ``max_output_tokens`` may be set.
        hooks: ``before_tool_call``/``after_tool_call`` may block, fail or change a
            call; ``should_stop_after_turn`` may stop the run; a run-level hook
            (transform, poll, ``prepare_next_turn``...) may raise.
        drivers: ``channel`` (``open_agent_loop``) and/or ``callback``
            (``run_agent_loop`` with ``on_event``, used only with no abort, no interrupt
            and no deadline).

    Raises:
        ValueError: an empty or unknown ``stop_reasons``, empty ``drivers``, or a tool
            name used twice or by a scripted tool.
        TypeError: ``tools`` holds something other than ``Tool`` objects.
    """
    if not stop_reasons:
        raise ValueError("stop_reasons must not be empty")
    unknown = set(stop_reasons) - set(STOP_REASONS)
    if unknown:
        raise ValueError(f"unknown stop reasons {sorted(unknown)}")
    if not drivers:
        raise ValueError("drivers must not be empty")
    own = as_tools(tools, "scripts(tools=...)")
    Script(tools=own)  # the name checks, now rather than at the first draw
    scripted = [WORK_TOOL, WORK_TOOL, WORK_TOOL, SERIAL_TOOL] + ["missing"] * unknown_tools

    def replies_with(behaviours: list[Behaviour], last: bool) -> st.SearchStrategy[ReplyScript]:
        calls = call_scripts(
            tools=scripted,
            behaviours=behaviours,
            own_tools=own,
            invalid_arguments=invalid_arguments,
            progress=progress,
            hooks=hooks,
        )
        return reply_scripts(
            calls=calls,
            last=last,
            stop_reasons=stop_reasons,
            max_calls=max_calls,
            duplicate_ids=duplicate_ids,
            stream_faults=stream_faults,
            stream_latency=stream_latency,
        )

    # Built once: a hang needs a timeout to end, so it is drawn only when one is set.
    calm: list[Behaviour] = ["ok", "ok", "ok", "ok"]
    risky: list[Behaviour] = [*calm, "fail", "terminate"] if failures else calm
    hanging: list[Behaviour] = [*risky, "hang"] if failures else calm
    replies_for = {
        (timed, last): replies_with(hanging if timed else risky, last)
        for timed in (False, True)
        for last in (False, True)
    }

    @st.composite
    def build(draw: st.DrawFn) -> Script:
        tool_timeout = _sometimes(draw, 40, st.sampled_from(_TIMEOUTS)) if timeouts else None
        n_replies = 0 if max_replies == 0 or _chance(draw, 5) else draw(st.integers(1, max_replies))
        replies = tuple(
            _numbered(draw(replies_for[tool_timeout is not None, step == n_replies - 1]), step)
            for step in range(n_replies)
        )
        prompt, past = _sometimes(draw, 40, starts(), ("go", ())) if history else ("go", ())
        steering_mode: QueueMode
        follow_up_mode: QueueMode
        queued, steering_mode, follow_up_mode = (
            _sometimes(draw, 50, arrival_plans(), ((), "one_at_a_time", "one_at_a_time"))
            if arrivals
            else ((), "one_at_a_time", "one_at_a_time")
        )
        abort = _sometimes(draw, 30, abort_scripts()) if aborts else None
        deadline = _sometimes(draw, 25, st.sampled_from(_DEADLINES)) if deadlines else None
        interrupts = _sometimes(draw, 15, interrupt_plans(), ()) if interrupt else ()
        stop_after_turn = _sometimes(draw, 5, st.integers(0, 3)) if hooks else None
        hook_failure = _sometimes(draw, 5, hook_failures()) if hooks else None
        limit_kwargs = _sometimes(draw, 50, limit_settings(), {}) if limits else {}
        controlled = abort is not None or deadline is not None or bool(interrupts)
        usable = [d for d in drivers if d == "channel" or not controlled]
        if not usable:
            # Only the callback driver was asked for: it cannot abort, interrupt or time out.
            abort = deadline = None
            interrupts = ()
            usable = list(drivers)
        return Script(
            replies=replies,
            prompt=prompt,
            history=past,
            tool_timeout=tool_timeout,
            arrivals=queued,
            abort=abort,
            interrupts=interrupts,
            deadline=deadline,
            stop_after_turn=stop_after_turn,
            hook_failure=hook_failure,
            chunk_size=draw(st.sampled_from([None, 4, 1])),
            driver=draw(st.sampled_from(usable)),
            steering_mode=steering_mode,
            follow_up_mode=follow_up_mode,
            tools=own,
            **limit_kwargs,
        )

    return build()
