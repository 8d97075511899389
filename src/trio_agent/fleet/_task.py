"""What a fleet runs and what it records: tasks, task set-ups and results.

A task line in a JSONL file (one JSON object per line)::

    {"id": "q-17", "prompt": "What is 2 + 2?", "messages": [...], "metadata": {...}}

``id`` (a string, or an integer taken as its decimal text) is required and unique;
``prompt`` is the user's text, appended to ``messages`` (earlier messages of the
conversation, in the format :func:`trio_agent.dumps` writes) — at least one of the two is
needed; ``metadata`` is any JSON object, handed to the factory untouched.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypeAlias

import attrs

from trio_agent import (
    Approve,
    Deny,
    LoopConfig,
    Message,
    Model,
    Result,
    Tool,
    TranscriptFormatError,
    TrioAgentError,
    Usage,
    loads,
)
from trio_agent._core import CallDecision, parse_json

__all__ = [
    "Decisions",
    "Factory",
    "FleetError",
    "FleetTask",
    "StorageError",
    "TaskResult",
    "TaskSetup",
    "load_decisions",
    "load_tasks",
    "task_from_json",
    "transcript_relpath",
]

FAILED: Final = "failed"
"""The reason of a task whose set-up or run raised (``error`` says what)."""
TIMEOUT: Final = "timeout"
"""The reason of a task that took longer than the fleet's ``task_timeout``."""
RETRIED_REASONS: Final = frozenset({FAILED, "error", TIMEOUT})
"""The reasons that count as failed: the exit code says so, ``retry_failed`` reruns them."""
DEFERRED: Final = "deferred"
"""A task whose run ended with calls waiting for a decision (``--decisions``)."""


class FleetError(TrioAgentError):
    """A fleet could not go on (every Ray worker died, say). What it recorded stays, and
    running the fleet again resumes the rest."""


class StorageError(FleetError):
    """The fleet's own files could not be read or written: a transcript, or
    ``results.jsonl`` (a full disk, too many open files, a file-size limit, a transcript
    another process holds). Not the task's failure: the task is left unrecorded, so the
    next run resumes it; the fleet stops. ``__cause__`` is the original error."""


# Ids used as file names as they are: up to 100 letters, digits, ".", "_", "-", not
# starting with "." or "-".
_SAFE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")
# Every name the hashed form makes: a cleaned-up stem of 1-60 of those characters and a
# "-", or nothing, then 16 hex digits. A safe id of this shape would share its file with
# the id it looks like the name of ("a_b-c8687a08aa5d6ed2" is the name of "a b"): such
# ids are hashed too, so the two sets of names never meet.
_HASHED_NAME = re.compile(r"(?:[A-Za-z0-9._-]{1,60}-)?[0-9a-f]{16}")


def _check_id(instance: Any, attribute: Any, value: Any) -> None:
    if type(value) is not str or not value:
        raise ValueError(f"a task id must be a non-empty string, got {value!r}")


def _tuple(value: Any) -> tuple[Any, ...]:
    return value if type(value) is tuple else tuple(value)


@attrs.frozen(kw_only=True)
class FleetTask:
    """One task of a fleet: an id, and the input of its run.

    Attributes:
        id: unique within the fleet; names the transcript and the line in
            ``results.jsonl``.
        prompt: the user's text, appended to ``messages`` as a ``UserMessage``; ``None``
            continues from ``messages`` (which must then end in a user message).
        messages: the conversation before the prompt (written first to the transcript).
        metadata: anything the factory needs (JSON values when read from a file).
    """

    id: str = attrs.field(validator=_check_id)
    prompt: str | None = None
    messages: tuple[Message, ...] = attrs.field(default=(), converter=_tuple)
    metadata: Mapping[str, Any] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        if self.prompt is None and not self.messages:
            raise ValueError(f"task {self.id!r} has neither a prompt nor messages")


@attrs.frozen(kw_only=True)
class TaskSetup:
    """What the factory builds for one task, on the worker that runs it.

    Attributes:
        model: streams the replies.
        tools: the tools of the run.
        system_prompt: the run's system prompt.
        config: hooks and limits; every limit counts across resumptions: a task
            resumed after 3 steps gets ``max_steps - 3`` more, and one whose replies
            so far used 2,000 output tokens gets ``max_output_tokens - 2000`` more (the
            same for ``max_input_tokens`` and ``max_cost``); a task resumed with a limit
            already spent is recorded (``max_steps``, ``usage_limit``) without a
            request.
    """

    model: Model
    tools: tuple[Tool, ...] = attrs.field(default=(), converter=_tuple)
    system_prompt: str = ""
    config: LoopConfig | None = None


Factory: TypeAlias = Callable[[FleetTask], "TaskSetup | Awaitable[TaskSetup]"]
"""Builds a task's model, tools and config; plain or async. Called on the worker."""


@attrs.frozen(kw_only=True)
class TaskResult:
    """One line of ``results.jsonl``: how a task ended.

    Attributes:
        id: the task's id.
        reason: how its run ended (``stop``, ``error``, ``max_steps``... as
            ``AgentRunResult.reason``), ``failed`` when the factory or the run raised,
            ``timeout`` when the attempt took longer than the fleet's ``task_timeout``.
        steps: model requests made, over every resumption.
        usage: tokens of every reply of the run, over every resumption.
        wall_time: seconds of the last attempt (set-up included).
        error: the model's error message (reason ``error``), the exception
            (``failed``), what timed out (``timeout``), else None.
        transcript: the JSONL transcript's path, relative to the output folder.
        resumed: True when the run continued an interrupted transcript.
        deferred: the ids of the calls that wait for a decision (reason ``deferred``):
            answer them with ``run_fleet(..., decisions=...)`` (``trio-agent fleet
            --decisions FILE.jsonl``).
        cost: what the run's replies cost in USD, over every resumption, each priced
            by its model and provider from the ``genai-prices`` table (the ``cost``
            extra); None when one cannot be priced.
    """

    id: str
    reason: str
    steps: int
    usage: Usage
    wall_time: float
    error: str | None
    transcript: str
    resumed: bool = False
    deferred: tuple[str, ...] = ()
    cost: float | None = None

    @property
    def failed(self) -> bool:
        """True when the run raised, ended on a model error or timed out (what
        ``retry_failed`` runs again)."""
        return self.reason in RETRIED_REASONS

    def to_json(self) -> dict[str, Any]:
        """The result as a ``results.jsonl`` line holds it (JSON data)."""
        return {
            "id": self.id,
            "reason": self.reason,
            "steps": self.steps,
            "usage": attrs.asdict(self.usage),
            "wall_time": round(self.wall_time, 6),
            "error": self.error,
            "transcript": self.transcript,
            "resumed": self.resumed,
            **({"deferred": list(self.deferred)} if self.deferred else {}),
            "cost": self.cost,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskResult:
        """The result a ``results.jsonl`` line holds (``to_json``'s inverse).

        Raises:
            KeyError: a field is missing.
        """
        return cls(
            id=data["id"],
            reason=data["reason"],
            steps=data["steps"],
            usage=Usage(**data["usage"]),
            wall_time=data["wall_time"],
            error=data["error"],
            transcript=data["transcript"],
            resumed=data.get("resumed", False),
            deferred=tuple(data.get("deferred", ())),
            cost=data.get("cost"),
        )


def transcript_relpath(task_id: str) -> str:
    """Where a task's transcript goes, relative to the output folder.

    Ids made of letters, digits, ``.``, ``_`` and ``-`` (up to 100, not starting with a
    dot or a dash) are used as they are; any other id becomes a cleaned-up prefix, a
    ``-`` and 16 hex digits of the SHA-256 of the id (``"a b"`` →
    ``a_b-c8687a08aa5d6ed2``). An id that itself has that shape (up to 60 characters, a
    ``-``, 16 lowercase hex digits; or the 16 digits alone) is hashed too, so no id is
    ever named like another one's hashed form: two ids share a file only if 64 bits of
    their SHA-256 are equal. (Ids that differ only in letter case share a file on a
    case-insensitive file system.)

    Output folders written before ids of that shape were hashed keep working: every
    other id has the name it had. A task with such an id that was interrupted then
    starts over under its new name (one already in ``results.jsonl`` is skipped as
    before, its line naming the old file).
    """
    if _SAFE_ID.fullmatch(task_id) and not _HASHED_NAME.fullmatch(task_id):
        name = task_id
    else:
        digest = hashlib.sha256(task_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", task_id).strip("._")[:60]
        name = f"{stem}-{digest}" if stem else digest
    return f"transcripts/{name}.jsonl"


def task_from_json(data: Any, *, where: str = "task") -> FleetTask:
    """A :class:`FleetTask` from a JSON object (see the module docstring for the fields).

    Raises:
        ValueError: not an object, no usable id, an unknown field, a field of the wrong
            type, or messages that do not read as messages; the message names ``where``.
    """
    if not isinstance(data, dict):
        raise ValueError(f"{where}: a task is a JSON object, got {type(data).__name__}")
    unknown = set(data) - {"id", "prompt", "messages", "metadata"}
    if unknown:
        raise ValueError(
            f"{where}: unknown field(s) {sorted(unknown)} (a task has id, prompt, "
            "messages, metadata)"
        )
    task_id = data.get("id")
    if type(task_id) is int:
        task_id = str(task_id)
    if type(task_id) is not str or not task_id:
        raise ValueError(f"{where}: 'id' must be a non-empty string or an integer")
    prompt = data.get("prompt")
    if prompt is not None and type(prompt) is not str:
        raise ValueError(f"{where}: 'prompt' must be a string")
    raw_messages = data.get("messages", [])
    if not isinstance(raw_messages, list):
        raise ValueError(f"{where}: 'messages' must be a list of messages")
    try:
        messages = loads(json.dumps(raw_messages)) if raw_messages else ()
    except TranscriptFormatError as exc:
        raise ValueError(f"{where}: 'messages' {exc}") from None
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict):
        raise ValueError(f"{where}: 'metadata' must be a JSON object")
    try:
        return FleetTask(id=task_id, prompt=prompt, messages=messages, metadata=metadata)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def load_tasks(path: str | os.PathLike[str]) -> list[FleetTask]:
    """Read a JSONL file of tasks (one JSON object per line; blank lines skipped).

    Blocks (file I/O): inside trio, call it through ``trio.to_thread.run_sync``.

    Raises:
        ValueError: a line that is not a task, or an id seen twice; the message names the
            file and line.
        OSError: the file cannot be read.
    """
    where = os.fspath(path)
    tasks: list[FleetTask] = []
    seen: dict[str, int] = {}
    with Path(path).open("rb") as f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            at = f"{where}:{number}"
            try:
                data = parse_json(raw)
            except ValueError as exc:
                raise ValueError(f"{at}: not JSON ({exc})") from None
            task = task_from_json(data, where=at)
            if task.id in seen:
                raise ValueError(
                    f"{at}: task id {task.id!r} was already used on line {seen[task.id]}"
                )
            seen[task.id] = number
            tasks.append(task)
    return tasks


Decisions: TypeAlias = Mapping[str, Mapping[str, CallDecision]]
"""Per task id, the decisions for its waiting calls (call id -> decision)."""

_DECISION_KINDS: Final = ("approve", "deny", "result")


def load_decisions(path: str | os.PathLike[str]) -> dict[str, dict[str, CallDecision]]:
    """Read a JSONL file of decisions for deferred fleet tasks. Blocks (file I/O).

    One JSON object per line: ``{"task": ID, "call": CALL_ID, "decision": "approve"}``
    (with ``"arguments": {...}`` to run it with edited arguments), ``"deny"`` (with
    ``"reason": TEXT``), or ``"result"`` (with ``"content": TEXT`` and optionally
    ``"is_error": true``). Blank lines are skipped.

    Raises:
        ValueError: a line that is not such an object, or a call decided twice; the
            message names the line.
        OSError: the file cannot be read.
    """
    out: dict[str, dict[str, CallDecision]] = {}
    where = os.fspath(path)
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{where}:{number}: not JSON ({exc})") from None
            if not isinstance(data, dict):
                raise ValueError(f"{where}:{number}: expected a JSON object")
            task, call, kind = data.get("task"), data.get("call"), data.get("decision")
            if not isinstance(task, str) or not isinstance(call, str):
                raise ValueError(f"{where}:{number}: 'task' and 'call' must be strings")
            if kind not in _DECISION_KINDS:
                raise ValueError(
                    f"{where}:{number}: 'decision' must be one of {', '.join(_DECISION_KINDS)}"
                )
            decision: CallDecision
            if kind == "approve":
                args = data.get("arguments")
                if args is not None and not isinstance(args, dict):
                    raise ValueError(f"{where}:{number}: 'arguments' must be an object")
                decision = Approve(args)
            elif kind == "deny":
                reason = data.get("reason")
                if reason is not None and not isinstance(reason, str):
                    raise ValueError(f"{where}:{number}: 'reason' must be a string")
                decision = Deny(reason)
            else:
                content = data.get("content")
                if not isinstance(content, str):
                    raise ValueError(f"{where}:{number}: 'content' must be a string")
                decision = Result(content, is_error=bool(data.get("is_error", False)))
            calls = out.setdefault(task, {})
            if call in calls:
                raise ValueError(f"{where}:{number}: call {call!r} of task {task!r} decided twice")
            calls[call] = decision
    return out
