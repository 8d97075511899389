"""Calls that wait for a person: what defers a call, the calls that wait, and the
decisions that answer them (values only; the rules of a resume are ``_resumption``).

A call waits when its tool is declared ``approval="always"`` (or its ``approval``
callable says so for these arguments), or when ``before_tool_call`` returns
:class:`Defer`, and no ``LoopConfig.approver`` answered it in time. The run then ends
``deferred`` once the batch's other calls have finished; ``result.deferred`` lists the
calls that wait (:class:`DeferredCall`), and ``resume(...)`` answers them with
:class:`Approve`, :class:`Deny` or :class:`Result`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

import attrs

from ._messages import AssistantMessage, Image, Text, ToolResultMessage

__all__ = [
    "Approve",
    "Approver",
    "CallDecision",
    "Defer",
    "Deferral",
    "DeferredCall",
    "Deny",
    "Result",
]


@attrs.frozen
class Defer:
    """What ``before_tool_call`` returns to make a call wait for a decision.

    The call does not run (its arguments were validated already). An ``approver`` set on
    the ``LoopConfig`` is asked first; without one, or when it does not answer in time,
    the call is deferred: the run ends ``deferred`` once the batch's other calls have
    finished, and the call waits, without a result, until ``resume`` answers it.

    Attributes:
        reason: why the call waits; shown to whoever decides.
    """

    reason: str | None = None


@attrs.frozen(kw_only=True)
class DeferredCall:
    """A call that waits for a decision (in ``AgentRunResult.deferred``, and what an
    ``approver`` is asked about).

    Attributes:
        id: the call's id (the key of its decision).
        name: the tool's name.
        arguments: the arguments as validated (converted to the types the tool's schema
            asks for, and as ``before_tool_call`` replaced them): what an approved call
            runs with unless the decision gives others.
        reason: why it waits (``Defer.reason``, or the tool's ``approval`` callable's
            text); None when nothing says.
    """

    id: str
    name: str
    arguments: Mapping[str, Any]
    reason: str | None = None


@attrs.frozen
class Approve:
    """The call runs now.

    Attributes:
        arguments: edited arguments, validated again against the tool's schema (invalid
            ones give the call an ``invalid_arguments`` error result); None runs it with
            the arguments as validated when it was deferred.
    """

    arguments: Mapping[str, Any] | None = None


@attrs.frozen
class Deny:
    """The call does not run: its result is an error (outcome ``blocked``) whose text is
    ``reason``, which the model reads — as a call ``before_tool_call`` blocks.

    Attributes:
        reason: why (the result's text); without one the result says "Tool call
            denied."
    """

    reason: str | None = None


@attrs.frozen
class Result:
    """The call does not run: ``content`` is its result, used as it is.

    Attributes:
        content: text, or text and image blocks, sent to the model.
        is_error: whether the result is an error.
        details: JSON data for the application (not sent to the model).
    """

    content: str | Sequence[Text | Image]
    is_error: bool = False
    details: Any = None


CallDecision: TypeAlias = Approve | Deny | Result
"""The answer to one deferred call."""

Approver: TypeAlias = Callable[[DeferredCall], Awaitable[CallDecision | None]]
"""``LoopConfig.approver``: asked about a call that would be deferred, while the run
waits; returns a decision, or None to defer the call."""


@attrs.frozen(kw_only=True)
class Deferral:
    """How a run that ended ``deferred`` left its last batch (``AgentRunResult.deferral``).

    The transcript then ends with the reply whose calls wait, followed by the results of
    its calls declared before the first deferred one: the results of the calls declared
    after it that ran are held back here (``held``), so that, once the waiting calls are
    answered, every result of the reply enters the transcript in declaration order.

    Attributes:
        message: the reply whose calls wait.
        calls: the calls that wait, in declaration order.
        held: the results held back, in declaration order.
    """

    message: AssistantMessage
    calls: tuple[DeferredCall, ...]
    held: tuple[ToolResultMessage, ...] = ()

    @property
    def waiting_ids(self) -> frozenset[str]:
        """The ids of the reply's calls with no result in the transcript yet: the
        deferred calls and the held-back ones."""
        return frozenset(c.id for c in self.calls) | {r.tool_call_id for r in self.held}
