"""Hypothesis strategies: messages, tool calls, replies, paired transcripts, scripts.

Every strategy takes keyword-only options and generates values that survive
``loads(dumps(x)) == x`` (finite floats, JSON values). Strings are arbitrary Unicode,
lone surrogates included (an undecodable file name, half of a split UTF-16 pair): the
transcript files must take anything the loop can emit. A high surrogate directly
followed by a low one is drawn as the one character the pair encodes — in JSON the two
are the same string. Choices are
ordered so that shrinking moves toward the plain case — a ``tool_use`` reply, a call that
answers at once, no abort — and a shrunk script reads as a small scenario.

This module imports Hypothesis (a test dependency); ``trio_agent.testing`` loads it only
when a strategy is first used.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st

from .._core import (
    AssistantMessage,
    CustomMessage,
    Image,
    Message,
    StopReason,
    Text,
    Thinking,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    as_tools,
    join_surrogate_pairs,
)
from ..replay import faults
from ._argument_strategies import mostly_valid_arguments, tool_arguments
from ._script_strategies import STOP_REASONS, scripts
from ._token_strategies import tokenised_runs

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._core import Tool

__all__ = [
    "assistant_replies",
    "faults",
    "image_blocks",
    "json_values",
    "messages",
    "scripts",
    "text_blocks",
    "thinking_blocks",
    "tokenised_runs",
    "tool_arguments",
    "tool_calls",
    "transcripts",
    "usages",
]

ROLES = ("user", "assistant", "tool_result", "custom")


# Any code point, surrogates drawn often enough to matter (Hypothesis' own default
# leaves them out). Drawn as lists: ``st.text`` with a union alphabet drew almost none.
_CHARACTERS = st.one_of(
    st.characters(codec=None, exclude_categories=()), st.characters(categories=["Cs"])
)


def _text(*, min_size: int = 0, max_size: int) -> st.SearchStrategy[str]:
    """Arbitrary Unicode text, lone surrogates included (pairs joined, see above)."""
    return (
        st.lists(_CHARACTERS, min_size=min_size, max_size=max_size)
        .map("".join)
        .map(join_surrogate_pairs)
    )


def json_values(*, max_leaves: int = 8) -> st.SearchStrategy[Any]:
    """JSON values that round-trip exactly: null, booleans, integers, finite floats,
    strings, lists and objects."""
    scalars: st.SearchStrategy[Any] = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        _text(max_size=12),
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(_text(max_size=8), inner, max_size=3)
        ),
        max_leaves=max_leaves,
    )


def _json_objects() -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(_text(max_size=8), json_values(max_leaves=4), max_size=3)


def _timestamps() -> st.SearchStrategy[float]:
    return st.floats(min_value=0, max_value=4e9, allow_nan=False)


def _optional_text() -> st.SearchStrategy[str | None]:
    return st.none() | _text(max_size=12)


def text_blocks() -> st.SearchStrategy[Text]:
    """``Text`` blocks."""
    return st.builds(Text, text=_text(max_size=30), signature=_optional_text())


def image_blocks() -> st.SearchStrategy[Image]:
    """``Image`` blocks (base64 data)."""
    return st.builds(
        Image,
        data=st.binary(max_size=24).map(lambda b: base64.b64encode(b).decode("ascii")),
        mime_type=st.sampled_from(["image/png", "image/jpeg", "image/gif"]),
    )


def thinking_blocks() -> st.SearchStrategy[Thinking]:
    """``Thinking`` blocks."""
    return st.builds(
        Thinking, thinking=_text(max_size=30), signature=_optional_text(), redacted=st.booleans()
    )


def usages() -> st.SearchStrategy[Usage]:
    """``Usage`` token counts."""
    counts = st.integers(min_value=0, max_value=10**7)
    return st.builds(
        Usage,
        input_tokens=counts,
        output_tokens=counts,
        cache_read_tokens=counts,
        cache_write_tokens=counts,
    )


def tool_calls(
    *,
    ids: st.SearchStrategy[str] | None = None,
    names: Sequence[str] | st.SearchStrategy[str] | None = None,
    arguments: st.SearchStrategy[dict[str, Any]] | None = None,
    tools: Sequence[Tool] | None = None,
    invalid_percent: int = 10,
) -> st.SearchStrategy[ToolCall]:
    """``ToolCall`` values.

    Args:
        ids: the call ids (default: short non-empty text).
        names: the tool names, a list to pick from or a strategy (default: any text).
        arguments: the JSON-object arguments (default: small JSON objects).
        tools: your own :class:`~trio_agent.Tool` objects: each call names one of them,
            with arguments drawn from its JSON Schema (see :func:`tool_arguments`),
            valid except ``invalid_percent`` % of the time. Excludes ``names`` and
            ``arguments``.
        invalid_percent: with ``tools``, how often (in %) the arguments are drawn
            invalid (the loop answers such a call with an error result); shrinks toward
            valid.

    Raises:
        ValueError: ``tools`` given with ``names`` or ``arguments``, or empty; an
            ``invalid_percent`` outside 0..100.
    """
    ids_st = ids if ids is not None else _text(min_size=1, max_size=8)
    if tools is not None:
        if names is not None or arguments is not None:
            raise ValueError("tools draws the names and the arguments: pass only tools")
        own = as_tools(tools, "tool_calls(tools=...)")
        if not own:
            raise ValueError("tools must not be empty")
        if not 0 <= invalid_percent <= 100:
            raise ValueError(f"invalid_percent must be within 0..100, not {invalid_percent}")
        return st.sampled_from(own).flatmap(
            lambda tool: st.builds(
                ToolCall,
                id=ids_st,
                name=st.just(tool.name),
                arguments=mostly_valid_arguments(tool, invalid_percent),
            )
        )
    if names is None:
        name_st: st.SearchStrategy[str] = _text(min_size=1, max_size=12)
    elif isinstance(names, st.SearchStrategy):
        name_st = names
    else:
        name_st = st.sampled_from(list(names))
    return st.builds(
        ToolCall,
        id=ids_st,
        name=name_st,
        arguments=arguments if arguments is not None else _json_objects(),
    )


def assistant_replies(
    *,
    stop_reasons: Sequence[StopReason] = STOP_REASONS,
    max_calls: int = 3,
    tool_names: Sequence[str] | None = None,
    unique_ids: bool = True,
    thinking: bool = True,
    tools: Sequence[Tool] | None = None,
) -> st.SearchStrategy[AssistantMessage]:
    """Finished ``AssistantMessage`` values: text, thinking and tool-call blocks.

    Args:
        stop_reasons: the stop reasons to pick from.
        max_calls: the most tool calls in one reply.
        tool_names: names the calls use (default: any text), with arbitrary JSON
            arguments.
        unique_ids: False lets one reply declare an id twice (a model bug the loop must
            survive).
        thinking: include thinking blocks.
        tools: your own :class:`~trio_agent.Tool` objects: the calls name them, with
            arguments drawn from each tool's JSON Schema, one in ten invalid (see
            :func:`tool_calls`). Excludes ``tool_names``.

    Raises:
        ValueError: both ``tool_names`` and ``tools``.
    """
    if tools is not None and tool_names is not None:
        raise ValueError("pass tool_names or tools, not both")
    call_options: dict[str, Any] = {"tools": tools} if tools is not None else {"names": tool_names}

    @st.composite
    def build(draw: st.DrawFn) -> AssistantMessage:
        reason = draw(st.sampled_from(list(stop_reasons)))
        blocks: list[Text | Thinking | ToolCall] = []
        if thinking and draw(st.booleans()):
            blocks.append(draw(thinking_blocks()))
        if draw(st.booleans()):
            blocks.append(draw(text_blocks()))
        n = draw(st.integers(0, max_calls))
        call_ids = st.text(alphabet="abc0123456789", min_size=1, max_size=4)
        calls = draw(
            st.lists(
                tool_calls(ids=call_ids, **call_options),
                max_size=n,
                min_size=n,
                unique_by=(lambda c: c.id) if unique_ids else None,
            )
        )
        blocks.extend(calls)
        failed = reason in ("error", "aborted")
        return AssistantMessage(
            content=tuple(blocks),
            stop_reason=reason,
            usage=draw(usages()),
            model=draw(_text(max_size=8)),
            provider=draw(_text(max_size=8)),
            error_message=draw(_text(max_size=20)) if failed else draw(_optional_text()),
            timestamp=draw(_timestamps()),
        )

    return build()


def messages(*, roles: Sequence[str] = ROLES, max_blocks: int = 3) -> st.SearchStrategy[Message]:
    """Any message (``user``, ``assistant``, ``tool_result``, ``custom``), each one
    surviving ``loads(dumps([m])) == (m,)``. Unpaired: see :func:`transcripts`.

    Args:
        roles: which kinds of message to generate.
        max_blocks: the most content blocks in one message.
    """
    unknown = set(roles) - set(ROLES)
    if unknown:
        raise ValueError(f"unknown roles {sorted(unknown)}; choose from {ROLES}")
    user_blocks = st.lists(st.one_of(text_blocks(), image_blocks()), max_size=max_blocks)
    options: list[st.SearchStrategy[Message]] = []
    if "user" in roles:
        options.append(st.builds(UserMessage, content=user_blocks, timestamp=_timestamps()))
    if "assistant" in roles:
        options.append(assistant_replies(max_calls=max_blocks, unique_ids=False))
    if "tool_result" in roles:
        options.append(
            st.builds(
                ToolResultMessage,
                tool_call_id=_text(min_size=1, max_size=8),
                tool_name=_text(min_size=1, max_size=12),
                content=user_blocks,
                details=json_values(max_leaves=4),
                structured_content=st.none() | json_values(max_leaves=4),
                is_error=st.booleans(),
                timestamp=_timestamps(),
            )
        )
    if "custom" in roles:
        options.append(
            st.builds(
                CustomMessage,
                kind=_text(min_size=1, max_size=8),
                content=json_values(max_leaves=4),
                details=json_values(max_leaves=4),
                timestamp=_timestamps(),
            )
        )
    return st.one_of(options)


def transcripts(
    *, max_turns: int = 4, max_calls: int = 3, max_output: int = 10
) -> st.SearchStrategy[tuple[Message, ...]]:
    """Transcripts that keep the pairing invariant: turns of user (or custom) messages,
    replies, and one result per call right after its reply, in declaration order; call
    ids unique across the whole transcript.

    Args:
        max_turns: the most replies.
        max_calls: the most calls in one reply (several make a parallel batch).
        max_output: the longest tool result text; above 10, a result is sometimes a
            large output of up to that many characters (for context policies).
    """

    # Lighter blocks than messages(): these transcripts are about structure (and every
    # field's round trip is covered by messages()), and a turn costs ~1 ms to draw.
    short = st.text(max_size=10)
    user_turns = st.builds(
        UserMessage, content=st.tuples(st.builds(Text, text=short)), timestamp=_timestamps()
    )
    notes = st.builds(CustomMessage, kind=st.just("note"), content=short, timestamp=_timestamps())
    names = st.sampled_from(["read", "write", "bash", "grep"])
    outputs = short
    if max_output > 10:
        outputs = short | st.integers(11, max_output).map(
            lambda n: ("0123456789" * (n // 10 + 1))[:n]
        )
    arguments = st.dictionaries(
        st.sampled_from(["path", "n", "flag"]), st.integers() | short | st.booleans(), max_size=2
    )

    @st.composite
    def build(draw: st.DrawFn) -> tuple[Message, ...]:
        out: list[Message] = []
        counter = 0
        for _ in range(draw(st.integers(0, max_turns))):
            out.extend(draw(st.lists(user_turns | notes, max_size=2)))
            calls = []
            for _ in range(draw(st.integers(0, max_calls))):
                calls.append(
                    ToolCall(id=f"call_{counter}", name=draw(names), arguments=draw(arguments))
                )
                counter += 1
            text: tuple[Text, ...] = (Text(text=draw(short)),) if draw(st.booleans()) else ()
            reasons: list[StopReason] = ["stop", "length", "error", "aborted"]
            out.append(
                AssistantMessage(
                    content=(*text, *calls),
                    stop_reason="tool_use" if calls else draw(st.sampled_from(reasons)),
                    timestamp=draw(_timestamps()),
                )
            )
            for call in calls:
                out.append(
                    ToolResultMessage(
                        tool_call_id=call.id,
                        tool_name=call.name,
                        content=(Text(text=draw(outputs)),),
                        is_error=draw(st.booleans()),
                        details=draw(st.none() | arguments),
                        timestamp=draw(_timestamps()),
                    )
                )
        return tuple(out)

    return build()
