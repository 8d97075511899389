"""``replay_session``: re-run a whole recorded session through the loop and real tools.

Theory of operation: a cassette holds requests, not the user's keystrokes; the user's
input is read back from the requests themselves. Before each request the replay knows
the transcript so far; the next recorded request must extend it, and what it adds
before the model is asked again — user messages — is what the user typed: the prompts
of a new run, or the messages a steering or follow-up poll returns within a run. Every
request then goes to a strict :class:`ReplayModel`, so the first request that differs
(because a tool now answers differently, say) stops the replay with a diff. A stream
that was aborted while recording (``cancelled``) ends at the same event as an aborted
reply, with the reason the recorded transcript shows.

An abort that fell while tools ran cannot be seen in a cassette: the replayed tools run
to the end, and the next request differs (its results were ``aborted``) — reported as a
divergence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from .._core import AssistantMessage, Context, LoopConfig, Message, UserMessage
from .._core import events as ev
from .._run import run_agent_loop
from ._cassette import message_differences
from ._replay import ReplayModel

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .._core import BeforeToolCallContext, BeforeToolCallResult, MaybeAwaitable, Tool
    from ._cassette import Cassette
    from ._replay import Timing

__all__ = ["SessionReplay", "replay_session"]


@attrs.frozen(kw_only=True)
class SessionReplay:
    """What :func:`replay_session` found.

    Attributes:
        requests: how many requests the replay made.
        recorded: how many the cassette holds.
        divergence: ``None`` when every request matched the cassette and the replay
            asked for nothing more; else which request differed and how (readable).
        transcript: the replayed transcript.
    """

    requests: int
    recorded: int
    divergence: str | None
    transcript: tuple[Message, ...]

    @property
    def identical(self) -> bool:
        """True when every request matched the cassette (``divergence`` is None)."""
        return self.divergence is None


def _extension(done: Sequence[Message], expected: Sequence[Message]) -> list[Message] | None:
    """The user messages ``expected`` adds after ``done``; None if it does not extend it."""
    if len(expected) < len(done) or message_differences(expected[: len(done)], done, limit=1):
        return None
    added = list(expected[len(done) :])
    if any(type(m) is not UserMessage for m in added):
        return None
    return added


def _abort_reason(expected: Sequence[Message], at: int) -> str:
    """The reason the recorded transcript gives for the reply aborted at index ``at``."""
    if at < len(expected):
        m = expected[at]
        if type(m) is AssistantMessage and m.stop_reason == "aborted" and m.error_message:
            return m.error_message
    return "aborted (as recorded)"


async def replay_session(
    cassette: Cassette,
    tools: Sequence[Tool] = (),
    *,
    timing: Timing = "none",
    on_event: Callable[[ev.AgentEvent], object] | None = None,
    before_tool_call: (
        Callable[[BeforeToolCallContext], MaybeAwaitable[BeforeToolCallResult | None]] | None
    ) = None,
) -> SessionReplay:
    """Re-run the session recorded in ``cassette`` through the loop and ``tools``.

    The system prompt and model options come from the first record; the user's
    messages from the requests (see the module docstring); ``on_event`` sees every
    event of every run, in order. Strict matching: the first request that differs
    from the recorded one ends the replay, and the divergence names it and its
    differing fields.

    The tool calls come from the cassette, that is from whoever wrote it: give
    ``before_tool_call`` (the loop's hook, see :class:`~trio_agent.LoopConfig`) to
    approve or block each call before it runs. A blocked call's result is not the
    recorded one, so the replay diverges at the next request.

    Blocks until the session is replayed (tools run for real); a checkpoint. On
    cancel, the run in progress cleans up as the loop does, and ``Cancelled``
    propagates.
    """
    records = cassette.records
    if not records:
        return SessionReplay(requests=0, recorded=0, divergence=None, transcript=())
    first = records[0].request
    # A session may start from an existing transcript: what precedes the first
    # request's trailing user messages is its context.
    head = list(first.messages)
    while head and type(head[-1]) is UserMessage:
        head.pop()
    live: list[Message] = head
    run_start = [0]

    def next_messages() -> list[Message]:
        # The poll before a run's first request would see the prompts not yet appended.
        step = len(model.requests)
        if step == run_start[0] or step >= len(records):
            return []
        return _extension(live, records[step].request.messages) or []

    def on_cancel_point(step: int) -> str:
        following = records[step + 1].request.messages if step + 1 < len(records) else ()
        return _abort_reason(following, len(live))

    def sink(event: ev.AgentEvent) -> None:
        # Called in the loop's own task, before it goes on: ``live`` is current at
        # every poll.
        if type(event) is ev.MessageEnd:
            live.append(event.message)
        if on_event is not None:
            on_event(event)

    model = ReplayModel(cassette, timing=timing, on_cancel_point=on_cancel_point)
    config = LoopConfig(
        model_options=first.options,
        before_tool_call=before_tool_call,
        get_steering_messages=next_messages,
        get_follow_up_messages=next_messages,
    )
    divergence: str | None = None
    while len(model.requests) < len(records):
        step = run_start[0] = len(model.requests)
        prompts = _extension(live, records[step].request.messages)
        if not prompts:
            shown = message_differences(records[step].request.messages[: len(live)], live)
            divergence = (
                f"request {step + 1}: the recorded conversation does not go on from the "
                "replayed one" + (f": {'; '.join(shown)}" if shown else "")
            )
            break
        context = Context(system_prompt=first.system_prompt, messages=tuple(live), tools=tools)
        await run_agent_loop(prompts, context, model, config, on_event=sink)
        if model.mismatches:
            divergence = str(model.mismatches[0])
            break
        if len(model.requests) > len(records):
            divergence = (
                f"request {len(records) + 1}: the replay asked the model again; the "
                f"cassette ends after request {len(records)}"
            )
            break
    return SessionReplay(
        requests=len(model.requests),
        recorded=len(records),
        divergence=divergence,
        transcript=tuple(live),
    )
