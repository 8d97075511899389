"""The error tree.

Every error the library raises on purpose derives from :class:`TrioAgentError`::

    TrioAgentError
    ├── AgentUsageError          the caller used the API wrongly
    │   └── AgentBusyError       a run is active; wait, steer or follow up instead
    ├── AgentRunError            a run failed (a hook raised, or a bug): `.result` holds
    │                            the paired transcript, `__cause__` the original error
    ├── OutputError              a run's structured output was read, but it has none
    ├── TranscriptFormatError    serialized messages that cannot be read back
    └── TranscriptError          a transcript that breaks the pairing invariant

A model that misbehaves or a tool that raises is *not* an error of the run: it becomes an
assistant message with stop reason ``error`` or an error tool result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._events import AgentRunResult

__all__ = [
    "AgentBusyError",
    "AgentRunError",
    "AgentUsageError",
    "OutputError",
    "TranscriptError",
    "TranscriptFormatError",
    "TrioAgentError",
]


class TrioAgentError(Exception):
    """Root of every error trio-agent raises on purpose."""


class AgentUsageError(TrioAgentError):
    """The API was used in a way that cannot work (the message says what to do instead)."""


class AgentBusyError(AgentUsageError):
    """An operation needs an idle agent, but a run is active."""


class OutputError(TrioAgentError):
    """``AgentRunResult.output`` was read, but the run ended without a valid output:
    its answer was still invalid after the retries (reason ``output_invalid``; the
    message names the last failure), or the run ended before answering."""


class AgentRunError(TrioAgentError):
    """A run ended because a hook raised or because of a bug.

    The run still ended cleanly: the transcript is paired and ``AgentEnd(reason="error")``
    was emitted. ``result`` is that final state; the original exception is ``__cause__``.
    It is raised on its own, never wrapped in an exception group.

    Attributes:
        result: the run's ``AgentRunResult`` (reason ``error``), its transcript paired.
    """

    def __init__(self, message: str, result: AgentRunResult) -> None:
        super().__init__(message)
        self.result = result


class TranscriptFormatError(TrioAgentError, ValueError):
    """Serialized messages could not be read.

    Attributes:
        path: where the first bad value is, like ``$[3].content[0].type``.
        line: the 1-based line of a JSONL file, when the text came from one.
    """

    def __init__(self, message: str, *, path: str = "$", line: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line


class TranscriptError(TrioAgentError, ValueError):
    """A transcript breaks the pairing invariant: a tool call without exactly one result
    right after its assistant message, in declaration order, or a result without a call.

    Attributes:
        violations: one readable line per breach, naming the messages by index
            (``messages[3]: ...``).
    """

    def __init__(self, violations: Sequence[str]) -> None:
        self.violations = tuple(violations)
        lines = "\n".join(f"  - {v}" for v in self.violations)
        super().__init__(f"transcript breaks the pairing invariant:\n{lines}")
