"""Running one task on a worker: fresh, resumed from its transcript, or recorded as done.

Theory of operation. A task's transcript (``transcripts/<id>.jsonl`` under the output
folder) is the only state a worker keeps; ``results.jsonl`` is written by the driver
alone. :func:`run_task` looks at the transcript first:

- no file, or nothing past the task's own messages: start over (the run had not begun);
- a transcript ending in a finished reply (an assistant message with no tool calls that
  was not aborted): the run had ended and only its line in ``results.jsonl`` was missing
  (the fleet died in between) — the result is rebuilt from the transcript, nothing runs;
- ``max_steps`` already spent: the same, with reason ``max_steps``;
- a token budget already spent (``max_input_tokens``, ``max_output_tokens``, judged as
  the loop judges it before a request, on the tokens of every reply already in the
  transcript): the same, with reason ``usage_limit``;
- anything else: the run was interrupted. The transcript is read (a torn last line
  dropped), :func:`~trio_agent.repair` gives every unanswered call an ``aborted``
  result, the file is rewritten if that changed it, a ``CustomMessage`` of kind
  ``trio_agent.fleet.resume`` is appended (so the context ends where a run may continue,
  also after an aborted reply, which the providers leave out), and the run continues with
  what it has left: the steps, and of each token budget the tokens not yet used.

So every limit of the task's ``LoopConfig`` counts across resumptions: however often a
task is interrupted and resumed, its run as a whole makes no more requests and spends no
more tokens than one uninterrupted run with that config would.

Every message a run finishes is appended to the transcript before the run goes on, so
however the worker dies, no finished message is lost, and a rerun picks up after it.
"""

from __future__ import annotations

import importlib
import inspect
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from trio_agent import (
    AgentRunError,
    AssistantMessage,
    Context,
    CustomMessage,
    JsonlTranscript,
    LoadedTranscript,
    LoopConfig,
    Message,
    TranscriptFormatError,
    UserMessage,
    load_transcript,
    repair,
    run_agent_loop,
    write_transcript,
)

from .._messages import sum_usage
from .._policy import over_budget
from ._task import FAILED, Factory, FleetTask, TaskResult, TaskSetup, transcript_relpath

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["RESUME_KIND", "Job", "resolve_factory", "run_task"]

RESUME_KIND = "trio_agent.fleet.resume"
"""The ``kind`` of the ``CustomMessage`` marking where a transcript was resumed."""

FsyncMode = bool | Literal["turn"]

_FINISHED_REPLY = {"stop": "stop", "length": "length", "error": "error"}


def resolve_factory(factory: Factory | str) -> Factory:
    """A factory, or the function a ``"module:function"`` string names (imported now).

    Raises:
        ValueError: a string that is not ``module:function``, or names nothing callable.
        ImportError: the module cannot be imported.
    """
    if not isinstance(factory, str):
        return factory
    module_name, sep, attr = factory.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"a factory string is 'module:function', got {factory!r}")
    module = importlib.import_module(module_name)
    value: Any = module
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise ValueError(f"{factory!r}: module {module_name!r} has no {attr!r}") from None
    if not callable(value):
        raise ValueError(f"{factory!r} is not callable")
    fn: Factory = value
    return fn


@attrs.frozen(kw_only=True)
class Job:
    """What every worker of a fleet shares (picklable when the factory is).

    Attributes:
        factory: builds a task's set-up (a callable or ``"module:function"``).
        out: the output folder (shared storage when workers are on several machines).
        fsync: the transcripts' ``JsonlTranscript.fsync`` mode.
    """

    factory: Factory | str
    out: Path = attrs.field(converter=Path)
    fsync: FsyncMode = "turn"


_UNBEGUN = LoadedTranscript(messages=())


def _load(path: Path) -> LoadedTranscript | None:
    """The transcript at ``path``; None when there is none; ``_UNBEGUN`` when the file
    has not even a whole first line (a crash right after creating it: no message can
    be in it, since messages come after the header line)."""
    try:
        return load_transcript(path)
    except FileNotFoundError:
        return None
    except TranscriptFormatError:
        with path.open("rb") as f:
            head = f.read(4096)
        if b"\n" not in head and len(head) < 4096:
            return _UNBEGUN
        raise


async def _setup(factory: Factory, task: FleetTask) -> TaskSetup:
    made = factory(task)
    if inspect.isawaitable(made):
        made = await made
    if not isinstance(made, TaskSetup):
        raise TypeError(f"the factory returned {type(made).__name__}, not a TaskSetup")
    return made


def _result(
    task: FleetTask,
    reason: str,
    run_messages: Sequence[Message],
    started: float,
    *,
    error: str | None = None,
    resumed: bool = False,
) -> TaskResult:
    return TaskResult(
        id=task.id,
        reason=reason,
        steps=sum(1 for m in run_messages if type(m) is AssistantMessage),
        usage=sum_usage(run_messages),
        wall_time=time.perf_counter() - started,
        error=error,
        transcript=transcript_relpath(task.id),
        resumed=resumed,
    )


async def run_task(
    task: FleetTask, factory: Factory, job: Job, *, may_exist: bool = True
) -> TaskResult:
    """Run ``task`` to its end (fresh or resumed, see the module docstring).

    A checkpoint. Never raises for the task's own failures: the factory raising, the run
    raising (``AgentRunError``), an unreadable transcript — each becomes a result with
    reason ``failed`` and the exception in ``error``. If cancelled, the run pairs its
    transcript (aborted results) as ``run_agent_loop`` does, the file is closed, and
    ``Cancelled`` propagates with no result: a later run of the fleet resumes the task.

    ``may_exist=False`` says the caller knows the transcript does not exist yet (the
    driver listed the folder before handing the task out): one file look-up is saved.
    """
    started = time.perf_counter()
    path = job.out / transcript_relpath(task.id)
    own = len(task.messages)
    history: tuple[Message, ...] = ()
    torn = existed = False
    try:
        loaded = await trio.to_thread.run_sync(_load, path) if may_exist else None
        if loaded is not None:
            existed = True
            if loaded is not _UNBEGUN:
                history = loaded.messages
                torn = not loaded.whole
        setup = await _setup(factory, task)
        config = setup.config or LoopConfig()
        if len(history) <= own:
            return await _fresh(task, setup, config, job, path, started, existed=existed)
        repaired = repair(history)
        run_part = repaired[own:]
        steps = sum(1 for m in run_part if type(m) is AssistantMessage)
        last = repaired[-1]
        if (
            type(last) is AssistantMessage
            and not last.tool_calls
            and last.stop_reason in _FINISHED_REPLY
        ):
            reason = _FINISHED_REPLY[last.stop_reason]
            return _result(task, reason, run_part, started, error=last.error_message)
        left = _limits_left(config, run_part, steps)
        if isinstance(left, str):
            return _result(task, left, run_part, started)
        if torn or repaired != history:
            await trio.to_thread.run_sync(
                partial(write_transcript, path, repaired, fsync=job.fsync is not False)
            )
        marker = CustomMessage(
            kind=RESUME_KIND,
            content="resumed after an interruption",
            details={"steps_before": steps, "repaired_calls": len(repaired) - len(history)},
        )
        async with JsonlTranscript(path, fsync=job.fsync) as transcript:
            await transcript.write_messages((marker,))
            result = await run_agent_loop(
                [],
                Context(
                    system_prompt=setup.system_prompt,
                    messages=(*repaired, marker),
                    tools=setup.tools,
                ),
                setup.model,
                left,
                on_event=transcript,
            )
        return _result(
            task,
            result.reason,
            (*run_part, *result.messages),
            started,
            error=result.error_message,
            resumed=True,
        )
    except Exception as exc:  # the user's factory, model or tools may raise anything
        return _failed(task, exc, started)


def _limits_left(
    config: LoopConfig, run_part: Sequence[Message], steps: int
) -> LoopConfig | Literal["max_steps", "usage_limit"]:
    """``config`` with the limits a resumed run has left, given the messages its earlier
    runs left in the transcript (``run_part``, ``steps`` replies); or the end reason of
    the first limit they already spent.

    Spent is what the loop itself checks before a request: ``steps`` has reached
    ``max_steps``; the output tokens used have reached ``max_output_tokens``, or the
    prompt tokens used plus those of the last reply's request exceed
    ``max_input_tokens`` (``over_budget``). What is left is each limit minus what was
    used, so that the resumed run stops where the uninterrupted one would have (an input
    budget is kept at 1 at least, the least ``LoopConfig`` takes, when a last reply
    without usage leaves it at exactly 0).
    """
    if steps >= config.max_steps:
        return "max_steps"
    config = attrs.evolve(config, max_steps=config.max_steps - steps)
    if config.max_input_tokens is None and config.max_output_tokens is None:
        return config
    used = sum_usage(run_part)
    last = next((m for m in reversed(run_part) if type(m) is AssistantMessage), None)
    if over_budget(
        used,
        last.usage.prompt_tokens if last is not None else 0,
        max_input_tokens=config.max_input_tokens,
        max_output_tokens=config.max_output_tokens,
    ):
        return "usage_limit"
    max_in, max_out = config.max_input_tokens, config.max_output_tokens
    return attrs.evolve(
        config,
        max_input_tokens=None if max_in is None else max(1, max_in - used.prompt_tokens),
        max_output_tokens=None if max_out is None else max_out - used.output_tokens,
    )


def _failed(task: FleetTask, exc: Exception, started: float) -> TaskResult:
    messages: Sequence[Message] = ()
    if isinstance(exc, AgentRunError) and exc.result is not None:
        messages = exc.result.messages
    return _result(task, FAILED, messages, started, error=f"{type(exc).__name__}: {exc}")


async def _fresh(
    task: FleetTask,
    setup: TaskSetup,
    config: LoopConfig,
    job: Job,
    path: Path,
    started: float,
    *,
    existed: bool,
) -> TaskResult:
    if existed:  # a header and part of the task's own messages: start over
        await trio.to_thread.run_sync(path.unlink)
    prompts = [UserMessage.text(task.prompt)] if task.prompt is not None else []
    async with JsonlTranscript(path, fsync=job.fsync) as transcript:
        if task.messages:
            await transcript.write_messages(task.messages)
        result = await run_agent_loop(
            prompts,
            Context(system_prompt=setup.system_prompt, messages=task.messages, tools=setup.tools),
            setup.model,
            config,
            on_event=transcript,
        )
    return _result(task, result.reason, result.messages, started, error=result.error_message)
