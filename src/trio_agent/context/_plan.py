"""How a compacted view is built from the history (:class:`Plan`), the turns it is cut
at, and rebuilding the view a model saw from a transcript's compaction markers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import attrs

from .._core import (
    AssistantMessage,
    CustomMessage,
    Text,
    ToolResultMessage,
    UserMessage,
)
from .._store import COMPACTION
from ._tokens import message_chars

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from .._core import Message
    from .._store import LoadedTranscript

__all__ = ["NO_PLAN", "Plan", "model_view", "render", "turn_starts"]


@attrs.frozen(kw_only=True)
class Plan:
    """How a view is built from a history ``messages`` (JSON data in a compaction
    marker line, so that the view can be rebuilt on load).

    The view is ``messages[:head]``; then, when ``first_kept > head``, one user message
    holding ``note`` standing in for ``messages[head:first_kept]`` (a summary, or a
    note saying what was dropped); then ``messages[first_kept:]``, where each tool
    result before ``elide_before`` whose text is longer than ``keep_chars`` is replaced
    by a short one saying what was elided. Messages appended to the history after the
    plan was made come last, verbatim.

    Attributes:
        head: the leading messages kept (up to the first user message), or 0.
        first_kept: the first message kept after the cut.
        note: the text standing in for the cut messages.
        elide_before: tool results before this index may be elided (0: none).
        keep_chars: how many characters of an elided result are kept.
    """

    head: int = 0
    first_kept: int = 0
    note: str = ""
    elide_before: int = 0
    keep_chars: int = 0

    @property
    def cuts(self) -> bool:
        """Whether messages are replaced by the note."""
        return self.first_kept > self.head

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON data."""
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Plan:
        """The plan of a marker's ``plan`` data (unknown keys ignored).

        Raises:
            ValueError: a field has the wrong type.
        """
        fields: dict[str, Any] = {}
        for f in attrs.fields(cls):
            if f.name in data:
                value = data[f.name]
                want = str if f.name == "note" else int
                if type(value) is not want:
                    raise ValueError(f"compaction plan: {f.name} must be {want.__name__}")
                fields[f.name] = value
        return cls(**fields)


NO_PLAN: Final = Plan()
"""The view is the history itself."""


def turn_starts(messages: tuple[Message, ...], stop: int) -> Iterator[int]:
    """The indices where the turns of ``messages`` start, newest first, down to
    ``stop``: a turn is an assistant reply, the user and custom messages right before it
    and the tool results after it (a trailing run of user messages, not answered yet, is
    a turn too). A turn never starts at a tool result, so cutting at a turn start never
    parts a call from its result. Walks back only as far as it is asked for."""
    i = len(messages)
    while i > stop:
        j = i - 1
        while j > stop and type(messages[j]) is ToolResultMessage:
            j -= 1
        # messages[j]: the turn's reply, or the last of the messages before any reply.
        while j > stop and type(messages[j - 1]) in _LEADING:
            j -= 1
        yield j
        i = j


_LEADING: Final = (UserMessage, CustomMessage)


def first_user(messages: tuple[Message, ...]) -> int:
    """The index of the first user message (``len(messages)`` if none)."""
    for i, message in enumerate(messages):
        if type(message) is UserMessage:
            return i
        if type(message) is AssistantMessage:
            break
    return len(messages)


def elided(result: ToolResultMessage, keep_chars: int) -> ToolResultMessage:
    """``result`` with its text cut to ``keep_chars`` characters and a line saying how
    much was elided and how to see it again (images dropped too). The call stays
    answered: same id, same tool, same error flag."""
    text = result.text
    kept = text[:keep_chars]
    dropped = len(text) - len(kept)
    images = sum(1 for b in result.content if type(b) is not Text)
    what = f"{dropped} more characters" + (f" and {images} image(s)" if images else "")
    return ToolResultMessage(
        tool_call_id=result.tool_call_id,
        tool_name=result.tool_name,
        content=(
            Text(
                text=f"{kept}\n[… {what} of this output were elided to save context; "
                f"call {result.tool_name} again to see them]"
            ),
        ),
        details=None,
        is_error=result.is_error,
        timestamp=result.timestamp,
    )


ELISION_CHARS: Final = 200
"""At most what the line saying what was elided adds to the kept characters; a result
is elided only when that makes it shorter."""


def is_elidable(message: Message, keep_chars: int) -> bool:
    """Whether ``message`` is a tool result an elision would shorten: an image, or a
    text longer than ``keep_chars`` plus :data:`ELISION_CHARS`."""
    if type(message) is not ToolResultMessage:
        return False
    n = 0
    for block in message.content:
        if type(block) is not Text:
            return True
        n += len(block.text)
    return n > keep_chars + ELISION_CHARS


class ElisionCache:
    """The elided form of each tool result, made once, and the elided part of the last
    view: the next request, whose elided part is the same plus a turn, costs that turn,
    not the whole part again."""

    __slots__ = ("_last", "_made")

    def __init__(self) -> None:
        self._made: dict[int, tuple[ToolResultMessage, int, ToolResultMessage]] = {}
        # The last elided part: (start, stop, keep_chars, messages[stop - 1], the part,
        # its characters).
        self._last: tuple[int, int, int, Message | None, tuple[Message, ...], int] | None = None

    @property
    def part_chars(self) -> int:
        """The characters of the last part made (0 before any)."""
        return 0 if self._last is None else self._last[5]

    def part(
        self, messages: tuple[Message, ...], start: int, stop: int, keep: int
    ) -> tuple[Message, ...]:
        """``messages[start:stop]`` with each elidable tool result elided, extending the
        last part made when ``messages`` still holds it."""
        last = self._last
        done: tuple[Message, ...] = ()
        begin = start
        chars = 0
        if last is not None:
            l_start, l_stop, l_keep, l_end, l_part, l_chars = last
            if (
                l_start == start
                and l_keep == keep
                and start < l_stop <= stop
                and messages[l_stop - 1] is l_end
            ):
                done, begin, chars = l_part, l_stop, l_chars
        new = _elide(messages[begin:stop], keep, self)
        part = done + new if done else new
        chars += sum(message_chars(m) for m in new)
        self._last = (start, stop, keep, messages[stop - 1], part, chars)
        return part

    def get(self, result: ToolResultMessage, keep_chars: int) -> ToolResultMessage:
        hit = self._made.get(id(result))
        if hit is not None and hit[0] is result and hit[1] == keep_chars:
            return hit[2]
        short = elided(result, keep_chars)
        self._made[id(result)] = (result, keep_chars, short)
        return short


def note_message(plan: Plan, messages: tuple[Message, ...]) -> UserMessage:
    """The user message standing in for the cut messages (its timestamp theirs)."""
    last = messages[plan.first_kept - 1] if plan.first_kept else None
    stamp = last.timestamp if last is not None else 0.0
    return UserMessage(content=(Text(text=plan.note),), timestamp=stamp)


def render(
    messages: tuple[Message, ...], plan: Plan, cache: ElisionCache | None = None
) -> tuple[Message, ...]:
    """The view ``plan`` makes of ``messages`` (see :class:`Plan`). Costs the kept
    messages, not the cut ones."""
    if plan == NO_PLAN:
        return messages
    head = messages[: plan.head]
    start = max(plan.first_kept, plan.head)
    note = (note_message(plan, messages),) if plan.cuts else ()
    stop = max(start, min(plan.elide_before, len(messages)))
    if stop == start:
        return head + note + messages[start:]
    keep = plan.keep_chars
    if cache is not None:
        middle = cache.part(messages, start, stop, keep)
    else:
        middle = _elide(messages[start:stop], keep, None)
    return head + note + middle + messages[stop:]


def _elide(
    messages: tuple[Message, ...], keep: int, cache: ElisionCache | None
) -> tuple[Message, ...]:
    out: list[Message] = []
    for message in messages:
        if is_elidable(message, keep):
            assert isinstance(message, ToolResultMessage)
            message = cache.get(message, keep) if cache is not None else elided(message, keep)
        out.append(message)
    return tuple(out)


def last_plan(loaded: LoadedTranscript) -> tuple[Plan, int] | None:
    """The plan of the last compaction marker of ``loaded`` and how many messages came
    before it; None when it has none.

    Raises:
        ValueError: the marker's plan is malformed.
    """
    markers = loaded.markers_of(COMPACTION)
    if not markers:
        return None
    marker = markers[-1]
    plan = marker.data.get("plan", {})
    if not isinstance(plan, dict):
        raise ValueError("compaction marker: plan must be an object")
    return Plan.from_json(plan), marker.at


def model_view(loaded: LoadedTranscript) -> tuple[Message, ...]:
    """The history the model saw, rebuilt from a loaded transcript: the view its last
    compaction marker describes (``JsonlTranscript`` writes one for each
    ``ContextCompacted`` event), followed by every message written after it. Without a
    compaction marker, the whole history.

    Raises:
        ValueError: the last compaction marker's plan is malformed or points past the
            messages before it.
    """
    found = last_plan(loaded)
    if found is None:
        return loaded.messages
    plan, at = found
    if max(plan.head, plan.first_kept) > at:
        raise ValueError(
            f"compaction marker at message {at} cuts at message {plan.first_kept}, "
            "past the messages before it"
        )
    return render(loaded.messages, plan)
