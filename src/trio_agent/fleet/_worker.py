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
- a transcript ending in a deferral (calls wait for a decision): with the fleet's
  decisions for the task (``Job.decisions``), the run is resumed from the file
  (``resume``: approved calls run once, then the loop goes on); without, the task is
  recorded ``deferred`` again and nothing runs. Such a transcript is never repaired;
- anything else: the run was interrupted. The transcript is read (a torn last line
  dropped), :func:`~trio_agent.repair` gives every unanswered call an ``aborted``
  result, the file is rewritten if that changed it, a ``CustomMessage`` of kind
  ``trio_agent.fleet.resume`` is appended (so the context ends where a run may continue,
  also after an aborted reply, which the providers leave out), and the run continues with
  what it has left: the steps, and of each token budget the tokens not yet used. With
  ``Job.retry_failed``, a transcript ending in an ``error`` reply is continued this way
  too, instead of being recorded as that error again.

So every limit of the task's ``LoopConfig`` counts across resumptions: however often a
task is interrupted and resumed, its run as a whole makes no more requests and spends no
more tokens than one uninterrupted run with that config would.

Every message a run finishes is appended to the transcript before the run goes on, so
however the worker dies, no finished message is lost, and a rerun picks up after it.

The transcript is the fleet's own storage: when it cannot be read or written (a full
disk, too many open files, a file another process holds), that is no failure of the
task — :func:`run_task` raises :class:`StorageError` and records nothing, so the next
run of the fleet resumes the task. A transcript is never removed: one to start over is
rewritten under its lock, which a transcript open in another process refuses.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import math
import os
import time
import traceback
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs
import trio

from trio_agent import (
    AgentRunError,
    AgentRunResult,
    AgentUsageError,
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
    resume,
    run_agent_loop,
    write_transcript,
)

from .._core import open_deferral, over_budget, over_cost, seconds, sum_usage, total_cost
from .._store import FsyncMode, Marker, carry_markers
from ._task import (
    DEFERRED,
    FAILED,
    TIMEOUT,
    Decisions,
    Factory,
    FleetTask,
    StorageError,
    TaskResult,
    TaskSetup,
    transcript_relpath,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

T = TypeVar("T")

__all__ = ["RESUME_KIND", "Job", "resolve_factory", "run_task"]

RESUME_KIND = "trio_agent.fleet.resume"
"""The ``kind`` of the ``CustomMessage`` marking where a transcript was resumed."""

_FINISHED_REPLY = {"stop": "stop", "length": "length", "error": "error"}


def resolve_factory(factory: Factory | str) -> Factory:
    """A factory, or the function a ``"module:function"`` string names (imported now,
    from ``sys.path`` as it is: the command line puts the current folder first).

    Raises:
        ValueError: a string that is not ``module:function``, or names nothing callable.
        ImportError: the module cannot be imported — not found, or its code raised
            while it was imported (any exception: the message names it and the line of
            the module where it happened; the original is the ``__cause__``).
    """
    if not isinstance(factory, str):
        return factory
    module_name, sep, attr = factory.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"a factory string is 'module:function', got {factory!r}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ImportError(
            f"cannot import {module_name!r} for the factory {factory!r}: {exc} (is it in "
            "the current folder or on PYTHONPATH?)"
        ) from exc
    except Exception as exc:  # the module's own code may raise anything
        raise ImportError(
            f"cannot import {module_name!r} for the factory {factory!r}: "
            f"{type(exc).__name__}: {exc}{_where(exc, module_name)}"
        ) from exc
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


def _where(exc: BaseException, module_name: str) -> str:
    """`` (path/module.py, line N)``: the last line of the module ``module_name`` (or of
    a module beside it that it imported) that ``exc`` went through, skipping the import
    machinery and installed libraries (also a virtualenv inside the project); "" if
    none (a ``SyntaxError`` names its line itself)."""
    try:  # a top-level name: finding it runs nothing
        spec = importlib.util.find_spec(module_name.partition(".")[0])
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return ""
    base = os.path.dirname(spec.origin) + os.sep
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        name = frame.filename
        installed = f"{os.sep}site-packages{os.sep}" in name
        if name.startswith(base) and not installed:
            return f" ({name}, line {frame.lineno})"
    return ""


@attrs.frozen(kw_only=True)
class Job:
    """What every worker of a fleet shares (picklable when the factory is).

    Attributes:
        factory: builds a task's set-up (a callable or ``"module:function"``).
        out: the output folder (shared storage when workers are on several machines).
        fsync: the transcripts' ``JsonlTranscript.fsync`` mode.
        task_timeout: seconds one attempt at a task may take (factory and run); then it
            ends with reason ``timeout``. None: no bound.
        retry_failed: continue a transcript that ended in an ``error`` reply instead of
            recording that error again (the fleet runs failed tasks again).
        timings: the transcripts record when each request and call happened
            (``JsonlTranscript.timings``).
        decisions: per task id, the decisions for the calls its run left waiting: such
            a task is resumed (``resume``) instead of recorded ``deferred`` again.
    """

    factory: Factory | str
    out: Path = attrs.field(converter=Path)
    fsync: FsyncMode = "turn"
    task_timeout: float | None = attrs.field(default=None, validator=seconds(optional=True))
    retry_failed: bool = False
    timings: bool = False
    decisions: Decisions = attrs.field(factory=dict)


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
    deferred: tuple[str, ...] = (),
) -> TaskResult:
    return TaskResult(
        id=task.id,
        reason=reason,
        steps=sum(1 for m in run_messages if type(m) is AssistantMessage),
        usage=sum_usage(run_messages),
        cost=total_cost(run_messages),
        wall_time=time.perf_counter() - started,
        error=error,
        transcript=transcript_relpath(task.id),
        resumed=resumed,
        deferred=deferred,
    )


def _storage_error(path: Path, exc: BaseException) -> StorageError:
    if isinstance(exc, AgentUsageError):  # the transcript's lock is held
        what = "is open in another process (a fleet still running on this folder?)"
        return StorageError(f"the transcript {path} {what}: {exc}")
    return StorageError(f"cannot write or read the transcript {path}: {exc}")


async def _on_disk(path: Path, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, a blocking operation on the transcript at ``path``, in a thread;
    its failure is a :class:`StorageError` (the fleet's storage, not the task, failed)."""
    try:
        return await trio.to_thread.run_sync(fn, *args)
    except (OSError, AgentUsageError) as exc:
        raise _storage_error(path, exc) from exc


@contextlib.asynccontextmanager
async def _open_transcript(path: Path, job: Job) -> AsyncIterator[JsonlTranscript]:
    """The task's :class:`JsonlTranscript`, open; a failure of its file — opening,
    writing (also as the run's sink), closing — is a :class:`StorageError`."""
    transcript = JsonlTranscript(path, fsync=job.fsync, timings=job.timings)
    try:
        await transcript.__aenter__()
    except (OSError, AgentUsageError) as exc:
        raise _storage_error(path, exc) from exc
    try:
        yield transcript
    except AgentRunError:
        broken = transcript.write_error
        if broken is not None:  # the run failed because its transcript could not write
            raise _storage_error(path, broken) from broken
        raise
    except (OSError, trio.BrokenResourceError) as exc:
        raise _storage_error(path, exc) from exc
    finally:
        try:
            await transcript.aclose()
        except OSError as exc:
            raise _storage_error(path, exc) from exc


async def run_task(
    task: FleetTask, factory: Factory, job: Job, *, may_exist: bool = True
) -> TaskResult:
    """Run ``task`` to its end (fresh or resumed, see the module docstring).

    A checkpoint. Never raises for the task's own failures: the factory raising, the run
    raising (``AgentRunError``), an unreadable transcript — each becomes a result with
    reason ``failed`` and the exception in ``error``. With ``job.task_timeout``, an
    attempt that takes longer (factory included) ends with reason ``timeout``: a run is
    ended by its ``LoopConfig.run_timeout`` (the transcript paired, ``AgentEnd`` last),
    a factory still running is cancelled. If cancelled, the run pairs its transcript
    (aborted results) as ``run_agent_loop`` does, the file is closed, and ``Cancelled``
    propagates with no result: a later run of the fleet resumes the task.

    ``may_exist=False`` says the caller knows the transcript does not exist yet (the
    driver listed the folder before handing the task out): one file look-up is saved.

    Raises:
        StorageError: the transcript could not be read or written (see the module
            docstring); no result: the task is to be run again later.
    """
    started = time.perf_counter()
    deadline = math.inf if job.task_timeout is None else trio.current_time() + job.task_timeout
    path = job.out / transcript_relpath(task.id)
    own = len(task.messages)
    history: tuple[Message, ...] = ()
    torn = existed = False
    try:
        loaded = await _on_disk(path, _load, path) if may_exist else None
        markers: tuple[Marker, ...] = ()
        if loaded is not None:
            existed = True
            if loaded is not _UNBEGUN:
                history = loaded.messages
                markers = loaded.markers
                torn = not loaded.whole
        with trio.move_on_at(deadline) as scope:
            setup = await _setup(factory, task)
        left = deadline - trio.current_time()
        if scope.cancelled_caught or left <= 0:
            return _timed_out(task, job, (), started, deadline=deadline)
        config = setup.config or LoopConfig()
        if left < (config.run_timeout or math.inf):
            config = attrs.evolve(config, run_timeout=left)
        if len(history) <= own:
            result = await _fresh(task, setup, config, job, path, existed=existed)
            return _ended(task, job, result, (), started, deadline=deadline)
        assert loaded is not None
        if open_deferral(loaded.messages, loaded.markers) is not None:
            # Calls wait for a decision: answered by the fleet's decisions, or still
            # waiting (recorded ``deferred`` again, nothing runs). Never repaired: the
            # waiting calls must keep no result.
            return await _answer(task, setup, config, job, path, loaded, started, deadline)
        repaired = repair(history)
        run_part = repaired[own:]
        steps = sum(1 for m in run_part if type(m) is AssistantMessage)
        last = repaired[-1]
        if (
            type(last) is AssistantMessage
            and not last.tool_calls
            and last.stop_reason in _FINISHED_REPLY
            and not (job.retry_failed and last.stop_reason == "error")
        ):
            reason = _FINISHED_REPLY[last.stop_reason]
            return _result(task, reason, run_part, started, error=last.error_message)
        limited = _limits_left(config, run_part, steps)
        if isinstance(limited, str):
            return _result(task, limited, run_part, started)
        if torn or repaired != history:
            # The marker lines (timings, ...) stay after the messages they followed.
            kept = carry_markers(history, repaired, markers)
            rewrite = partial(
                write_transcript, path, repaired, markers=kept, fsync=job.fsync is not False
            )
            await _on_disk(path, rewrite)
        marker = CustomMessage(
            kind=RESUME_KIND,
            content="resumed after an interruption",
            details={"steps_before": steps, "repaired_calls": len(repaired) - len(history)},
        )
        async with _open_transcript(path, job) as transcript:
            await transcript.write_messages((marker,))
            result = await run_agent_loop(
                [],
                Context(
                    system_prompt=setup.system_prompt,
                    messages=(*repaired, marker),
                    tools=setup.tools,
                ),
                setup.model,
                limited,
                on_event=transcript,
            )
        return _ended(task, job, result, run_part, started, deadline=deadline, resumed=True)
    except StorageError:
        raise
    except Exception as exc:  # the user's factory, model or tools may raise anything
        return _failed(task, exc, started)


async def _answer(
    task: FleetTask,
    setup: TaskSetup,
    config: LoopConfig,
    job: Job,
    path: Path,
    loaded: LoadedTranscript,
    started: float,
    deadline: float,
) -> TaskResult:
    """A task whose transcript ends in a deferral: resumed with the fleet's decisions
    for it, else recorded ``deferred`` again from the transcript."""
    run_part = loaded.messages[len(task.messages) :]
    decisions = job.decisions.get(task.id)
    if not decisions:
        return _result(task, DEFERRED, run_part, started, deferred=_waiting(loaded))
    steps = sum(1 for m in run_part if type(m) is AssistantMessage)
    limited = _limits_left(config, run_part, steps)
    if isinstance(limited, str):
        return _result(task, limited, run_part, started)
    async with _open_transcript(path, job) as transcript:
        result = await resume(
            loaded,
            decisions,
            model=setup.model,
            tools=setup.tools,
            system_prompt=setup.system_prompt,
            config=limited,
            on_event=transcript,
        )
    return _ended(task, job, result, run_part, started, deadline=deadline, resumed=True)


def _waiting(loaded: LoadedTranscript) -> tuple[str, ...]:
    found = open_deferral(loaded.messages, loaded.markers)
    if found is None:
        return ()
    return tuple(c.id for c in found.deferral.calls if c.id not in found.answered)


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
    used (and the cost budget less what was spent, ``over_cost``), so that the resumed
    run stops where the uninterrupted one would have (an input
    budget is kept at 1 at least, the least ``LoopConfig`` takes, when a last reply
    without usage leaves it at exactly 0).
    """
    if steps >= config.max_steps:
        return "max_steps"
    config = attrs.evolve(config, max_steps=config.max_steps - steps)
    if config.max_cost is not None:
        if over_cost(run_part, config.max_cost):
            return "usage_limit"
        config = attrs.evolve(config, max_cost=config.max_cost - (total_cost(run_part) or 0.0))
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


def _ended(
    task: FleetTask,
    job: Job,
    result: AgentRunResult,
    before: Sequence[Message],
    started: float,
    *,
    deadline: float,
    resumed: bool = False,
) -> TaskResult:
    """The result of a run that ended, after the ``before`` messages of earlier runs."""
    messages = (*before, *result.messages)
    if result.reason == TIMEOUT:
        return _timed_out(task, job, messages, started, deadline=deadline, resumed=resumed)
    return _result(
        task,
        result.reason,
        messages,
        started,
        error=result.error_message,
        resumed=resumed,
        deferred=tuple(c.id for c in result.deferred),
    )


def _timed_out(
    task: FleetTask,
    job: Job,
    messages: Sequence[Message],
    started: float,
    *,
    deadline: float,
    resumed: bool = False,
) -> TaskResult:
    if trio.current_time() >= deadline:
        why = f"the task took longer than its task_timeout of {job.task_timeout:g}s"
    else:
        why = "the run took longer than its LoopConfig.run_timeout"
    return _result(task, TIMEOUT, messages, started, error=why, resumed=resumed)


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
    *,
    existed: bool,
) -> AgentRunResult:
    prompts = [UserMessage.text(task.prompt)] if task.prompt is not None else []
    if existed:
        # A header and part of the task's own messages: start over by rewriting the file
        # under its lock (refused while another process has it open: never removed).
        await _on_disk(
            path, partial(write_transcript, path, task.messages, fsync=job.fsync is not False)
        )
    async with _open_transcript(path, job) as transcript:
        if task.messages and not existed:
            await transcript.write_messages(task.messages)
        result = await run_agent_loop(
            prompts,
            Context(system_prompt=setup.system_prompt, messages=task.messages, tools=setup.tools),
            setup.model,
            config,
            on_event=transcript,
        )
    return result
