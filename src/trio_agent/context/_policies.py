"""The context policies that need no model: :class:`KeepRecent`,
:class:`ElideToolOutputs`, and what every policy shares (:class:`Policy`, the budget,
composing)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import attrs

from .._core import NO_USAGE, ContextRequest, ContextView, Message, ModelOptions
from .._core import events as ev
from ._plan import (
    ELISION_CHARS,
    NO_PLAN,
    ElisionCache,
    Plan,
    first_user,
    is_elidable,
    render,
    turn_starts,
)
from ._tokens import TokenCounter, fixed_chars, message_chars, window_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._core import Model
    from .._store import LoadedTranscript

__all__ = ["Budget", "ElideToolOutputs", "KeepRecent", "Policy", "compose"]

_OVERFLOW_SHRINK: Final = 0.5
"""After a refusal for length, the budget is this fraction of the refused request's
estimate (or of the window): the estimate was too low, so the retry aims well under."""

_CHARS_KEPT: Final = 50_000
"""The most message sizes a policy remembers; past it they are counted again."""

_CEILING: Final = 0.9
"""After a refusal for length, later requests aim under this fraction of the refused
request's estimate (the real window is below it), however large the window is said to
be."""


@attrs.define(kw_only=True)
class Budget:
    """What a policy may spend on one request, in estimated tokens.

    Attributes:
        limit: the most prompt tokens the view may take (the window less the room kept
            for the reply), None when no window is known.
        fixed: the tokens every request takes besides its messages (system prompt,
            tools).
        counter: the estimator (characters per token).
        overflow: the provider refused the last request as too long.
        chars: each message's characters, by ``id`` of the message (with the message, so
            that the id stays its own), counted once and kept by the policy across
            requests.
    """

    limit: int | None
    fixed: int
    counter: TokenCounter
    overflow: bool = False
    chars: dict[int, tuple[Message, int]] = attrs.field(factory=dict)

    def message_chars(self, messages: tuple[Message, ...], i: int, plan: Plan) -> int:
        """The characters ``messages[i]`` takes in the view ``plan`` makes."""
        if (
            i < plan.elide_before
            and i >= plan.first_kept
            and is_elidable(messages[i], plan.keep_chars)
        ):
            return plan.keep_chars + ELISION_CHARS
        message = messages[i]
        hit = self.chars.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        n = message_chars(message)
        self.chars[id(message)] = (message, n)
        return n

    def span(self, messages: tuple[Message, ...], start: int, stop: int, plan: Plan) -> int:
        """The estimated tokens of ``messages[start:stop]`` in the view ``plan`` makes."""
        return self.counter.tokens(
            sum(self.message_chars(messages, i, plan) for i in range(start, stop))
        )

    def newest(
        self, messages: tuple[Message, ...], floor: int, turns: int, room: int | None, plan: Plan
    ) -> int:
        """Where the newest turns of ``messages`` kept start: at most ``turns`` of them,
        not before ``floor``, and no more than fit in ``room`` tokens (None: no bound) —
        but always the newest one. Walks back only over the turns it keeps (and one)."""
        first = len(messages)
        used = 0
        for n, start in enumerate(turn_starts(messages, floor)):
            if n >= turns:
                break
            if room is not None:
                cost = self.span(messages, start, first, plan)
                if n >= 1 and used + cost > room:
                    break
                used += cost
            first = start
        return first

    def view_tokens(self, messages: tuple[Message, ...], plan: Plan) -> int:
        """The estimated prompt tokens of the view ``plan`` makes (fixed part
        included). Costs the kept messages."""
        n = self.fixed + self.span(messages, 0, plan.head, plan)
        if plan.cuts:
            n += self.counter.tokens(len(plan.note) + 16)
        return n + self.span(messages, max(plan.first_kept, plan.head), len(messages), plan)


class Policy:
    """What every context policy shares: ``compact`` (the ``LoopConfig.context``
    protocol), calling it as a ``transform_context`` hook, and the estimate.

    A policy object keeps what it learned about the conversation it serves (the
    characters-per-token ratio; :class:`Summarize` its summary), so give each
    conversation its own (an Agent keeps one for all its runs). A subclass defines
    :meth:`plan`.
    """

    name: str = "policy"
    """The policy's name in ``ContextCompacted.policy`` (and the marker line)."""
    window: int | None = None
    """The context window in tokens when the request does not give one (None: from
    ``ModelOptions.context_window`` or the table of known models)."""
    model: Model | None = None
    """The model the policy asks (for a summary); None: the run's."""

    def __init__(self) -> None:
        self._counter = TokenCounter()
        self._cache = ElisionCache()
        self._last: Plan = NO_PLAN
        self._ceiling: int | None = None  # learned from refusals (see _CEILING)
        # The characters of the history counted so far: (messages counted, the last of
        # them, their characters), so that each request counts only the new ones.
        self._counted: tuple[int, Message | None, int] = (0, None, 0)
        # Each message's characters, counted once (see Budget.chars).
        self._chars: dict[int, tuple[Message, int]] = {}

    async def plan(
        self,
        messages: tuple[Message, ...],
        budget: Budget,
        prior: Plan,
        request: ContextRequest,
    ) -> tuple[Plan, ev.ContextCompacted | None]:
        """The plan of the view of ``messages``, building on ``prior`` (the plan of the
        policies composed before this one), and the event of a compaction this policy
        made that is more than a cut (a summary: its usage); None otherwise."""
        raise NotImplementedError

    def resume(self, loaded: LoadedTranscript) -> None:
        """Continue a conversation loaded from a transcript: take up the compaction its
        last compaction marker recorded, when this policy made it. Stateless policies
        need nothing (they work from the history each request)."""

    def _view_tokens(self, messages: tuple[Message, ...], plan: Plan, budget: Budget) -> int:
        """The estimated prompt tokens of the view ``plan`` made of ``messages`` (by
        :func:`render`, just now), fixed part included. Costs the head and the messages
        after the elided part; the elided part's size is the cache's, kept up to date
        as it grows."""
        if plan == NO_PLAN:
            return budget.fixed + budget.counter.tokens(self._history_chars(messages))
        start = max(plan.first_kept, plan.head)
        stop = max(start, min(plan.elide_before, len(messages)))
        n = sum(budget.message_chars(messages, i, NO_PLAN) for i in range(plan.head))
        if plan.cuts:
            n += len(plan.note) + 16
        if stop > start:
            n += self._cache.part_chars
        n += sum(budget.message_chars(messages, i, NO_PLAN) for i in range(stop, len(messages)))
        return budget.fixed + budget.counter.tokens(n)

    def _history_chars(self, messages: tuple[Message, ...]) -> int:
        """The characters of the whole history, counting only the messages added since
        the last call (when the history still holds the ones counted then)."""
        n, last, chars = self._counted
        if not (0 < n <= len(messages) and messages[n - 1] is last):
            n, chars = 0, 0
        chars += sum(message_chars(m) for m in messages[n:])  # each message once
        self._counted = (len(messages), messages[-1] if messages else None, chars)
        return chars

    def budget(self, messages: tuple[Message, ...], request: ContextRequest) -> Budget:
        """The budget of one request (calibrating the estimate from the last reply)."""
        counter = self._counter
        counter.observe(messages)
        window = window_of(request.options, request.model, self.window)
        fixed = counter.tokens(fixed_chars(request.system_prompt, request.tools))
        limit = None
        if window is not None:
            reserve = request.options.max_tokens or window // 8
            limit = max(1, window - min(reserve, window // 2))
        if request.overflow:
            refused = counter.sent_tokens or limit
            if refused is not None:
                # The window is below what was refused: later requests stay under it.
                ceiling = int(refused * _CEILING)
                self._ceiling = ceiling if self._ceiling is None else min(self._ceiling, ceiling)
                limit = max(1, int(min(limit or refused, refused) * _OVERFLOW_SHRINK))
        elif self._ceiling is not None:
            limit = self._ceiling if limit is None else min(limit, self._ceiling)
        if len(self._chars) > _CHARS_KEPT:
            self._chars.clear()  # a bound on what a very long conversation keeps
        return Budget(
            limit=limit,
            fixed=fixed,
            counter=counter,
            overflow=request.overflow,
            chars=self._chars,
        )

    async def compact(self, messages: tuple[Message, ...], request: ContextRequest) -> ContextView:
        """The view of ``messages`` for one request (see ``LoopConfig.context``), with
        a ``ContextCompacted`` event when its plan differs from the last one reported.
        Awaits only what :meth:`plan` awaits (a summary request)."""
        budget = self.budget(messages, request)
        plan, event = await self.plan(messages, budget, NO_PLAN, request)
        view = render(messages, plan, self._cache)
        after = self._view_tokens(messages, plan, budget)
        self._counter.sent(len(messages), int(after * self._counter.ratio))
        if plan == self._last or (plan == NO_PLAN and event is None):
            self._last = plan
            return ContextView(messages=view)
        self._last = plan
        tokens_before = budget.fixed + budget.counter.tokens(self._history_chars(messages))
        event = ev.ContextCompacted(
            policy=self.name,
            reason="overflow" if request.overflow else "threshold",
            tokens_before=tokens_before,
            tokens_after=after,
            messages_before=len(messages),
            messages_after=len(view),
            usage=event.usage if event is not None else NO_USAGE,
            plan=plan.to_json(),
        )
        return ContextView(messages=view, compacted=event)

    async def __call__(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        """The policy as a ``transform_context`` hook: the view of ``messages``, with the
        policy's own ``window`` and ``model`` (no events, no overflow recovery: pass the
        policy as ``LoopConfig.context`` for those)."""
        model = self.model
        request = ContextRequest(
            system_prompt="",
            tools=(),
            model=model if model is not None else NO_MODEL,
            options=ModelOptions(),
        )
        view = await self.compact(tuple(messages), request)
        return view.messages


class _NoModel:
    """The model a policy used as a ``transform_context`` hook is given when it has none
    of its own: it has no name (so no known window), and cannot be asked."""

    model = ""

    def stream(self, request: Any) -> Any:
        raise NO_MODEL_ERROR


NO_MODEL_ERROR: Final = TypeError(
    "this policy needs a model: give it model=..., or pass it as LoopConfig.context so "
    "that it uses the run's"
)


NO_MODEL: Any = _NoModel()


def _at_least(name: str, value: int, least: int) -> int:
    if type(value) is not int or value < least:
        raise ValueError(f"{name} must be an int of at least {least}, not {value!r}")
    return value


def _head(messages: tuple[Message, ...], keep_first: bool) -> int:
    """Where the kept head ends: after the first user message (and whatever comes
    before it), or 0."""
    if not keep_first:
        return 0
    i = first_user(messages)
    return i + 1 if i < len(messages) else 0


def _drop_note(dropped: int) -> str:
    return (
        f"[{dropped} earlier messages of this conversation were left out to fit the "
        "context window; the conversation goes on from here]"
    )


class KeepRecent(Policy):
    """Keep the newest ``turns`` turns and drop the older ones (a note says how many
    messages were left out).

    A turn is one assistant reply with the user messages before it and the tool results
    after it: a cut never parts a call from its result. The system prompt is always
    sent, and the first user message is kept unless ``keep_first=False`` (a dropped
    part is then stood in for by the note, so the view still starts with a user
    message). When the model's context window is known (``ModelOptions.context_window``,
    ``window``, or the table of known models), fewer turns are kept when ``turns`` of
    them would not fit — but always the newest one. After the provider refused a
    request as too long, it aims at half that request's estimate (half the turns when
    no window is known).

    Costs the turns it keeps, not the history: it walks back from the newest message.

    Args:
        turns: the most turns kept (at least 1).
        keep_first: keep the first user message (the task).
        window: the context window in tokens, when the request does not say
            (``ModelOptions.context_window`` wins).

    Raises:
        ValueError: ``turns`` is less than 1, or ``window`` less than 1.
    """

    name = "keep_recent"
    """The policy's name in ``ContextCompacted.policy``."""

    def __init__(self, turns: int = 8, *, keep_first: bool = True, window: int | None = None):
        super().__init__()
        self.turns = _at_least("turns", turns, 1)
        self.keep_first = bool(keep_first)
        self.window = None if window is None else _at_least("window", window, 1)

    def __repr__(self) -> str:
        return f"KeepRecent(turns={self.turns}, keep_first={self.keep_first}, window={self.window})"

    async def plan(
        self,
        messages: tuple[Message, ...],
        budget: Budget,
        prior: Plan,
        request: ContextRequest,
    ) -> tuple[Plan, ev.ContextCompacted | None]:
        """Cut before the newest turns kept (see the class docstring)."""
        head = prior.head if prior.cuts else _head(messages, self.keep_first)
        floor = max(head, prior.first_kept)
        turns = self.turns
        if budget.overflow and budget.limit is None:
            turns = max(1, turns // 2)
        limit = budget.limit
        used = 0
        if limit is not None:
            used = budget.fixed + budget.span(messages, 0, head, prior)
            note = prior.note if prior.cuts else _drop_note(len(messages))
            used += budget.counter.tokens(len(note) + 16)
        room = None if limit is None else limit - used
        first = budget.newest(messages, floor, turns, room, prior)
        if first <= floor:
            return (attrs.evolve(prior, head=head) if prior.cuts else prior), None
        note = prior.note if prior.cuts else _drop_note(first - head)
        return attrs.evolve(prior, head=head, first_kept=first, note=note), None


class ElideToolOutputs(Policy):
    """Shorten old, large tool results: each result in a turn older than the newest
    ``older_than`` turns whose text is longer than ``keep_chars`` characters keeps its
    first ``keep_chars`` characters and a line saying how much was elided and that
    calling the tool again shows it. The call stays answered (same id, same tool, same
    error flag). After the provider refused a request as too long, every turn but the
    newest is elided.

    Each elided result is made once and reused by later requests. A request costs a
    pass over the turns it may elide — all but the newest, unless a policy composed
    before it (:class:`KeepRecent`, :class:`Summarize`) cut the older ones.

    Args:
        older_than: the newest turns left whole (at least 0).
        keep_chars: the characters an elided result keeps (at least 0).

    Raises:
        ValueError: a negative argument.
    """

    name = "elide_tool_outputs"
    """The policy's name in ``ContextCompacted.policy``."""

    def __init__(self, older_than: int = 2, keep_chars: int = 200):
        super().__init__()
        self.older_than = _at_least("older_than", older_than, 0)
        self.keep_chars = _at_least("keep_chars", keep_chars, 0)

    def __repr__(self) -> str:
        return f"ElideToolOutputs(older_than={self.older_than}, keep_chars={self.keep_chars})"

    async def plan(
        self,
        messages: tuple[Message, ...],
        budget: Budget,
        prior: Plan,
        request: ContextRequest,
    ) -> tuple[Plan, ev.ContextCompacted | None]:
        """Elide before the newest turns left whole (see the class docstring)."""
        whole = 1 if budget.overflow else self.older_than
        floor = max(prior.head, prior.first_kept)
        before = len(messages)
        for n, start in enumerate(turn_starts(messages, floor)):
            if n >= whole:
                break
            before = start
        if whole == 0:
            before = len(messages)
        if before <= floor:
            return prior, None
        return attrs.evolve(prior, elide_before=before, keep_chars=self.keep_chars), None


class Composed(Policy):
    """Several policies, each planning on what the ones before it planned."""

    def __init__(self, policies: tuple[Policy, ...]) -> None:
        super().__init__()
        self.policies = policies
        self.name = "+".join(p.name for p in policies)
        windows = [p.window for p in policies if p.window is not None]
        self.window = min(windows) if windows else None
        models = [p.model for p in policies if p.model is not None]
        self.model = models[0] if models else None

    def __repr__(self) -> str:
        return f"compose({', '.join(map(repr, self.policies))})"

    async def plan(
        self,
        messages: tuple[Message, ...],
        budget: Budget,
        prior: Plan,
        request: ContextRequest,
    ) -> tuple[Plan, ev.ContextCompacted | None]:
        """Each policy's plan, on the one before."""
        made: ev.ContextCompacted | None = None
        for policy in self.policies:
            prior, event = await policy.plan(messages, budget, prior, request)
            made = event or made
        return prior, made

    def resume(self, loaded: LoadedTranscript) -> None:
        for policy in self.policies:
            policy.resume(loaded)


def compose(*policies: Policy) -> Policy:
    """One policy applying ``policies`` in order, each planning on what the ones before
    it planned: ``compose(ElideToolOutputs(), KeepRecent(turns=20))`` elides old
    outputs and then keeps as many of the newest turns as fit (counting them elided).

    Raises:
        TypeError: no policy, or something that is not one of this module's policies.
    """
    if not policies:
        raise TypeError("compose() needs at least one policy")
    for p in policies:
        if not isinstance(p, Policy):
            raise TypeError(f"compose() takes context policies, not {type(p).__name__}")
    return policies[0] if len(policies) == 1 else Composed(policies)
