"""The :class:`Summarize` policy: a model request of its own replaces the older part of
the history with one summary."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

import attrs
import trio

from .._core import (
    NO_USAGE,
    AssistantMessage,
    ModelOptions,
    ModelRequest,
    Text,
    Thinking,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from .._core import events as ev
from ._plan import Plan, last_plan
from ._policies import NO_MODEL, Policy, _at_least, _head

if TYPE_CHECKING:
    from .._core import ContextRequest, Message, Model, Usage
    from .._store import LoadedTranscript
    from ._policies import Budget

__all__ = ["SUMMARY_PROMPT", "Summarize"]

SUMMARY_PROMPT: Final = (
    "You write the working memory of an AI agent whose conversation grew too long for "
    "its context window. You are given the earlier part of that conversation (and the "
    "summary of what came before it, if there was one). Write a summary the agent can "
    "continue from without the original: the user's goal and constraints, decisions "
    "taken and why, what was done (files read or changed, commands run, their important "
    "results, errors met), what is still open, and the exact names, paths, identifiers "
    "and values it will need. Be concrete and brief. Answer with the summary only."
)
"""The instructions of a summary request."""

SUMMARY_HEADER: Final = "[Summary of the earlier conversation]"
"""The first line of the message that stands in for the summarised messages."""

_RESULT_CHARS: Final = 2000
"""The most characters of one tool result shown to the summariser."""


def _transcribe(messages: tuple[Message, ...], limit: int) -> str:
    """``messages`` as plain text for the summariser, newest kept when it has to be
    cut to ``limit`` characters (each tool result cut to :data:`_RESULT_CHARS`)."""
    lines: list[str] = []
    for message in messages:
        if type(message) is UserMessage:
            text = "".join(b.text for b in message.content if type(b) is Text)
            lines.append(f"USER: {text}")
        elif type(message) is AssistantMessage:
            for block in message.content:
                if type(block) is Text:
                    lines.append(f"ASSISTANT: {block.text}")
                elif type(block) is Thinking and not block.redacted:
                    lines.append(f"ASSISTANT (thinking): {block.thinking}")
                elif type(block) is ToolCall:
                    args = json.dumps(block.arguments, ensure_ascii=False, default=str)
                    lines.append(f"ASSISTANT calls {block.name}({args}) [id {block.id}]")
            if message.stop_reason == "error":
                lines.append(f"(the reply failed: {message.error_message})")
        elif type(message) is ToolResultMessage:
            text = message.text
            if len(text) > _RESULT_CHARS:
                text = text[:_RESULT_CHARS] + f" […{len(text) - _RESULT_CHARS} more characters]"
            flag = " (error)" if message.is_error else ""
            lines.append(f"RESULT of {message.tool_name} [id {message.tool_call_id}]{flag}: {text}")
    out = "\n".join(lines)
    if len(out) > limit:
        out = "[…the oldest part is left out…]\n" + out[len(out) - limit :]
    return out


class Summarize(Policy):
    """Summarise the older part of the history when it grows past ``trigger`` of the
    context window: a model request of its own (``model``, or the run's) writes a
    summary of everything but the newest ``keep_recent`` turns, and the view becomes
    the first user message, one user message holding the summary, and those turns.
    Later requests reuse the summary (no new request) until the view passes the trigger
    again; the next summary covers the previous one and the turns since.

    The summary request is reported in the ``ContextCompacted`` event (its ``usage``).
    It is bounded by ``timeout`` seconds; one that fails or times out drops those
    messages with a note saying so instead, and the run goes on. An abort or a cancel
    while it streams stops it, and the run ends as aborted with its transcript paired
    (nothing of the summary enters it). After the provider refused a request as too
    long, the next request summarises at once and keeps half as many turns.

    Without a known context window (``ModelOptions.context_window``, ``window``, or the
    table of known models) it never triggers except after a refusal.

    A ``JsonlTranscript`` records each summary in a compaction marker line; after
    loading a transcript, :meth:`resume` takes the summary up again so that the
    conversation goes on from the view the model saw.

    Args:
        model: the model that writes the summaries (a cheaper one, say); None uses the
            run's model with the run's options.
        trigger: the fraction of the window (less the room kept for the reply) past
            which the history is summarised, above 0 and at most 1.
        keep_recent: the newest turns kept verbatim (at least 1).
        keep_first: keep the first user message (the task) before the summary.
        window: the context window in tokens when the request does not say
            (``ModelOptions.context_window`` wins).
        options: the options of the summary request (default: the run's model name
            when ``model`` is None, and ``max_tokens=max_summary_tokens``).
        max_summary_tokens: the most tokens a summary may take.
        timeout: the most seconds a summary request may take (None: no bound).
        prompt: the summary request's instructions.

    Raises:
        ValueError: an argument out of its range.
    """

    name = "summarize"
    """The policy's name in ``ContextCompacted.policy``."""

    def __init__(
        self,
        model: Model | None = None,
        *,
        trigger: float = 0.8,
        keep_recent: int = 4,
        keep_first: bool = True,
        window: int | None = None,
        options: ModelOptions | None = None,
        max_summary_tokens: int = 2048,
        timeout: float | None = 120.0,
        prompt: str = SUMMARY_PROMPT,
    ) -> None:
        super().__init__()
        if not (isinstance(trigger, int | float) and 0 < trigger <= 1):
            raise ValueError(f"trigger must be a fraction in (0, 1], not {trigger!r}")
        if timeout is not None and not (isinstance(timeout, int | float) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.model = model
        self.trigger = float(trigger)
        self.keep_recent = _at_least("keep_recent", keep_recent, 1)
        self.keep_first = bool(keep_first)
        self.window = None if window is None else _at_least("window", window, 1)
        self.options = options
        self.max_summary_tokens = _at_least("max_summary_tokens", max_summary_tokens, 1)
        self.timeout = timeout
        self.prompt = prompt
        # The summary in force: it stands for messages[head:first_kept]; valid while
        # messages[first_kept - 1] is still ``anchor`` (the same conversation).
        self._summary: Plan | None = None
        self._anchor: Message | None = None
        self.summaries = 0
        """How many summary requests this policy made."""

    def __repr__(self) -> str:
        return (
            f"Summarize(model={self.model!r}, trigger={self.trigger}, "
            f"keep_recent={self.keep_recent}, window={self.window})"
        )

    def resume(self, loaded: LoadedTranscript) -> None:
        """Take up the summary of ``loaded``'s last compaction marker, when a summary
        made it, so that the next request shows what the model saw last.

        Raises:
            ValueError: the marker's plan is malformed.
        """
        found = last_plan(loaded)
        if found is None:
            return
        plan, at = found
        marker = loaded.markers_of("compaction")[-1]
        if "summarize" not in str(marker.data.get("policy", "")).split("+"):
            return
        if plan.cuts and 0 < plan.first_kept <= at:
            self._summary = Plan(head=plan.head, first_kept=plan.first_kept, note=plan.note)
            self._anchor = loaded.messages[plan.first_kept - 1]

    def _current(self, messages: tuple[Message, ...]) -> Plan | None:
        """The summary in force, if it belongs to ``messages``."""
        plan = self._summary
        if plan is None:
            return None
        i = plan.first_kept - 1
        if i < len(messages) and messages[i] is self._anchor:
            return plan
        self._summary = self._anchor = None
        return None

    async def plan(
        self,
        messages: tuple[Message, ...],
        budget: Budget,
        prior: Plan,
        request: ContextRequest,
    ) -> tuple[Plan, ev.ContextCompacted | None]:
        """The summary in force, or a new one when the view passes the trigger (see
        the class docstring); awaits the summary request."""
        current = self._current(messages)
        base = prior
        if current is not None and current.first_kept > max(prior.first_kept, prior.head):
            base = attrs.evolve(
                prior, head=current.head, first_kept=current.first_kept, note=current.note
            )
        limit = budget.limit
        over = limit is not None and budget.view_tokens(messages, base) > self.trigger * limit
        if not (over or budget.overflow):
            return base, None
        head = base.head if base.cuts else _head(messages, self.keep_first)
        floor = max(head, base.first_kept)
        keep = max(1, self.keep_recent // 2) if budget.overflow else self.keep_recent
        # The newest turns kept; fewer when they alone would pass half the budget.
        room = None if limit is None else limit // 2
        first = budget.newest(messages, floor, keep, room, base)
        if first <= floor:
            return base, None
        previous = base.note if base.cuts else ""
        summary, usage = await self._summarise(previous, messages[floor:first], request, budget)
        plan = attrs.evolve(base, head=head, first_kept=first, note=summary)
        self._summary = Plan(head=head, first_kept=first, note=summary)
        self._anchor = messages[first - 1]
        return plan, ev.ContextCompacted(policy=self.name, usage=usage)

    async def _summarise(
        self,
        previous: str,
        part: tuple[Message, ...],
        request: ContextRequest,
        budget: Budget,
    ) -> tuple[str, Usage]:
        """The summary of ``previous`` (the summary in force) and ``part``, and the
        usage of its request. A failed or timed-out request gives a note saying so."""
        model = self.model if self.model is not None else request.model
        if model is NO_MODEL:
            raise TypeError(
                "Summarize needs a model: give it model=..., or pass it as "
                "LoopConfig.context so that it uses the run's"
            )
        options = self.options
        if options is None:
            name = request.options.model if self.model is None else None
            options = ModelOptions(model=name, max_tokens=self.max_summary_tokens)
        # What the summariser is shown stays well inside its own window.
        limit = int((budget.limit or 100_000) * budget.counter.ratio * 0.6)
        text = _transcribe(part, limit)
        if previous:
            text = f"<previous-summary>\n{previous}\n</previous-summary>\n\n{text}"
        ask = ModelRequest(
            system_prompt=self.prompt,
            messages=(
                UserMessage.text(
                    f"<conversation>\n{text}\n</conversation>\n\nWrite the summary now."
                ),
            ),
            options=options,
        )
        self.summaries += 1
        final: AssistantMessage | None = None
        with trio.move_on_after(self.timeout if self.timeout is not None else float("inf")):
            try:
                async with model.stream(ask) as events:
                    async for event in events:
                        if type(event) is ev.Done or type(event) is ev.Error:
                            final = event.message
                            break
            except Exception as exc:
                why = f"the summary request failed: {type(exc).__name__}: {exc}"
                return self._fallback(len(part), why, previous), NO_USAGE
        if final is None:
            why = (
                f"the summary request took more than {self.timeout:g}s"
                if self.timeout is not None
                else "the summary request ended without a reply"
            )
            return self._fallback(len(part), why, previous), NO_USAGE
        if final.stop_reason not in ("stop", "length") or not final.text.strip():
            why = f"the summary request failed: {final.error_message or 'an empty reply'}"
            return self._fallback(len(part), why, previous), final.usage
        return f"{SUMMARY_HEADER}\n{final.text.strip()}", final.usage

    @staticmethod
    def _fallback(dropped: int, why: str, previous: str) -> str:
        note = (
            f"[{dropped} earlier messages of this conversation were left out to fit the "
            f"context window ({why})]"
        )
        return f"{previous}\n\n{note}" if previous else note
