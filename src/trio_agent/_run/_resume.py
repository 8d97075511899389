"""``resume``: answer a deferred run's waiting calls and go on with the loop.

The run's machine does the work (``TurnMachine.resume_turn``): a resumed run starts by
finishing the deferred reply's turn — the ``decisions`` marker first, then one batch
that runs the approved calls and gives every other waiting or held-back call its
result, all appended in declaration order — and only then makes its first request. The
rules of the plan (which decisions are valid, what a crashed resume left) are
``_core._resumption``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .._core import (
    AgentRunResult,
    AgentUsageError,
    Context,
    LoopConfig,
    OpenDeferral,
    ToolResultMessage,
    as_tools,
    check_loop_config,
    check_model,
    open_deferral,
    plan_resume,
)
from ._runner import OnEvent, Runner

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from .._core import CallDecision, Deferral, MarkerLike, Message, Model, ResumePlan, Tool

__all__ = ["DeferredSource", "in_memory", "plan_for", "resume"]


class TranscriptWithMarkers(Protocol):
    """A loaded transcript (``LoadedTranscript``): its messages and marker lines."""

    @property
    def messages(self) -> tuple[Message, ...]: ...

    @property
    def markers(self) -> tuple[MarkerLike, ...]: ...


DeferredSource = AgentRunResult | TranscriptWithMarkers
"""What a resume starts from: a run's result (it ended ``deferred``), or a transcript
loaded from a file (``load_transcript(path)``) that ends in a deferral."""


def in_memory(messages: Sequence[Message], deferral: Deferral) -> OpenDeferral:
    """The deferral a run's result (or an Agent) holds, as a transcript records it."""
    ids = {c.id for c in deferral.message.tool_calls}
    answered = frozenset(
        m.tool_call_id for m in messages if type(m) is ToolResultMessage and m.tool_call_id in ids
    )
    return OpenDeferral(deferral, {}, answered)


def plan_for(
    source: object, decisions: Mapping[str, CallDecision]
) -> tuple[tuple[Message, ...], ResumePlan]:
    """The transcript to resume and the plan that answers its waiting calls.

    Raises:
        AgentUsageError: ``source`` waits for nothing (a run that did not end
            ``deferred``, a transcript whose deferral was answered or that has none), or
            the decisions do not answer the waiting calls exactly (see ``resume``).
        TypeError: ``source`` is neither a run's result nor a loaded transcript, or a
            decision is not one.
        TranscriptFormatError: the transcript's deferral marker is malformed.
    """
    if isinstance(source, AgentRunResult):
        messages = source.transcript
        deferral = source.deferral
        if deferral is None:
            raise AgentUsageError(
                f"nothing to resume: the run ended {source.reason!r}, not 'deferred'"
            )
        found = in_memory(messages, deferral)
    elif hasattr(source, "messages") and hasattr(source, "markers"):
        messages = tuple(source.messages)
        markers: Iterable[MarkerLike] = source.markers
        opened = open_deferral(messages, markers)
        if opened is None:
            raise AgentUsageError(
                "nothing to resume: the transcript has no deferral that waits (none was "
                "recorded, or every call of it has its result)"
            )
        found = opened
    else:
        raise TypeError(
            "resume() starts from a run's AgentRunResult or a loaded transcript "
            f"(load_transcript(path)), not {type(source).__name__}"
        )
    return messages, plan_resume(found, decisions)


async def resume(
    source: DeferredSource,
    decisions: Mapping[str, CallDecision],
    *,
    model: Model,
    tools: Sequence[Tool] = (),
    system_prompt: str = "",
    config: LoopConfig | None = None,
    on_event: OnEvent | None = None,
) -> AgentRunResult:
    """Answer the calls a deferred run left waiting, then go on with the loop.

    Every waiting call is answered before the first request: an approved call
    (``Approve()``) runs now, with the arguments as validated when it was deferred — or
    ``Approve(arguments=...)``'s, validated again (invalid ones give an
    ``invalid_arguments`` error result); a denied one (``Deny(reason)``) gets an error
    result with the reason (outcome ``blocked``); a given one (``Result(content)``) gets
    that result as it is. The results held back by the deferral (calls declared after
    the first deferred one, which ran) enter with them: all in declaration order. The
    run then goes on as ``run_agent_loop`` does, and may end ``deferred`` again.

    From a file, after the process that deferred has exited::

        loaded = load_transcript(path)
        async with JsonlTranscript(path) as transcript:
            result = await resume(loaded, {"call_1": Approve()}, model=model,
                                  tools=tools, on_event=transcript)

    Exactly once across a crash: the resumed run first emits a ``RecordMarker`` with
    the decisions, which a ``JsonlTranscript`` sink writes (and fsyncs) before any
    approved call runs. A later resume from a file where an approved call has that
    marker but no result does not run it again: the process may have stopped while it
    ran, so it gets an ``aborted`` error result saying it was not run again. A denied
    or given call recorded there gets the recorded result; a decision for a call a
    crashed resume decided already is refused. Resume the latest state: in-process, the
    result of the last ``resume``, not an earlier one (an earlier result would run its
    approved calls again).

    Args:
        source: a run's ``AgentRunResult`` (reason ``deferred``), or a loaded
            transcript (``load_transcript(path)``) that ends in a deferral.
        decisions: call id -> ``Approve()``, ``Deny(reason)`` or ``Result(content)``,
            one for each waiting call (``result.deferred``) that a crashed resume did
            not decide already.
        model: what streams the replies from here.
        tools: the tools the approved calls and the rest of the run use (looked up by
            name; a missing one gives the call a ``not_found`` result).
        system_prompt: the instructions sent with every request.
        config: hooks and limits, as for ``run_agent_loop`` (``before_tool_call`` and
            the tools' ``approval`` are not asked again for approved calls). Its limits
            (``max_steps``, token budgets) apply to the resumed run alone; a fleet
            counts them across resumptions.
        on_event: called with every event, as for ``run_agent_loop``.

    Raises:
        AgentUsageError: before anything runs: nothing waits in ``source``, a decision
            names an unknown id, a call that ran already (held back) or one already
            answered or decided, or a waiting call has no decision. The message lists
            every problem and the waiting ids.
        TypeError: before anything runs: a decision that is not ``Approve``, ``Deny``
            or ``Result``, or a ``Result`` that a transcript cannot hold.
        AgentRunError: a hook or ``on_event`` raised (as for ``run_agent_loop``).
    """
    config = LoopConfig() if config is None else config
    check_loop_config(config)
    check_model(model)
    messages, plan = plan_for(source, decisions)
    context = Context(
        system_prompt=system_prompt, messages=messages, tools=as_tools(tools, "tools")
    )
    runner = Runner([], context, model, config, on_event=on_event, controlled=False, plan=plan)
    return await runner.run()
