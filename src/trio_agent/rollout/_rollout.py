"""``rollout``: one run of a task, scored, as training data."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from trio_agent import (
    AgentRunResult,
    Context,
    JsonlTranscript,
    LoopConfig,
    Message,
    UserMessage,
    run_agent_loop,
)

from ._trajectory import Trajectory

if TYPE_CHECKING:
    import os

    from trio_agent import AgentEvent, Model, Tool

__all__ = ["Reward", "Rollout", "rollout", "score"]

Reward = Callable[[tuple[Message, ...]], "float | Awaitable[float]"]
"""Scores a finished run from its transcript; plain or async."""


@attrs.frozen(kw_only=True)
class Rollout:
    """A scored run: unpacks as ``trajectory, reward, transcript``.

    Attributes:
        trajectory: the run's :class:`Trajectory` (its reward set).
        reward: what the reward function gave (None without one).
        transcript: the run's messages (the task first).
        result: the run's ``AgentRunResult`` (how it ended, steps, usage).
    """

    trajectory: Trajectory
    reward: float | None
    transcript: tuple[Message, ...]
    result: AgentRunResult

    def __iter__(self) -> Iterator[Any]:
        return iter((self.trajectory, self.reward, self.transcript))


async def score(reward: Reward | None, transcript: tuple[Message, ...]) -> float | None:
    """``reward(transcript)`` awaited if it returns an awaitable, as a float (None
    without a reward function).

    Raises:
        TypeError: the reward is not a number.
    """
    if reward is None:
        return None
    value: Any = reward(transcript)
    if hasattr(value, "__await__"):
        value = await value
    if type(value) is bool or not isinstance(value, int | float):
        raise TypeError(f"the reward function returned {value!r}, not a number")
    return float(value)


async def rollout(
    task: str | Sequence[Message],
    model: Model,
    tools: Sequence[Tool] = (),
    *,
    reward: Reward | None = None,
    system_prompt: str = "",
    config: LoopConfig | None = None,
    transcript: str | os.PathLike[str] | None = None,
    on_event: Callable[[AgentEvent], Any] | None = None,
) -> Rollout:
    """Run ``task`` once with ``model`` and ``tools``, score it, build its trajectory.

    For token-exact trajectories the model must capture tokens
    (``OpenAIChat(..., tokens=True)`` against vLLM or SGLang); with another model the
    trajectory has no calls (its replies are listed in ``untokenised``).

    Args:
        task: the user's text, or the messages the run starts from (ending with a user
            message).
        model: the policy.
        tools: the run's tools.
        reward: scores the finished run from its transcript (plain or async); called
            once the run ended, whatever the reason (an ``error`` or ``max_steps`` run
            is scored too).
        system_prompt: the run's system prompt.
        config: limits, timeouts and hooks (``LoopConfig``).
        transcript: a path: the run is written there as a JSONL transcript as it goes
            (``fsync=False``: it survives a process crash, not a power loss).
        on_event: also called with every event of the run, in order.

    Returns:
        The :class:`Rollout` (``trajectory, reward, transcript = await rollout(...)``).

    Blocks until the run and the reward function finished. Cancelling it cancels the
    run: the transcript (the file, and what ``on_event`` saw) is left paired — every
    unanswered tool call gets an ``aborted`` result — and ``Cancelled`` propagates; the
    reward function is not called.

    Raises:
        AgentRunError: a hook or ``on_event`` raised (see ``run_agent_loop``).
        TypeError: the reward function returned something that is not a number.
        Exception: whatever the reward function raised.
    """
    prompts: list[Message] = [UserMessage.text(task)] if isinstance(task, str) else list(task)
    context = Context(system_prompt=system_prompt, tools=tuple(tools))
    if transcript is None:
        result = await run_agent_loop(prompts, context, model, config, on_event=on_event)
    else:
        async with JsonlTranscript(transcript, fsync=False) as sink:

            async def both(event: AgentEvent) -> None:
                await sink.write_event(event)
                if on_event is not None:
                    value = on_event(event)
                    if hasattr(value, "__await__"):
                        await value

            result = await run_agent_loop(prompts, context, model, config, on_event=both)
    value = await score(reward, result.transcript)
    return Rollout(
        trajectory=Trajectory.from_transcript(result.transcript, reward=value),
        reward=value,
        transcript=result.transcript,
        result=result,
    )
