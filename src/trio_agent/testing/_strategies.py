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
from typing import TYPE_CHECKING, Any, Literal, get_args

from hypothesis import strategies as st

from .._messages import (
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
)
from .._serde import join_surrogate_pairs
from ..replay._strategies import faults
from ._argument_strategies import tool_arguments
from ._script import Script
from ._script_values import (
    SERIAL_TOOL,
    WORK_TOOL,
    AbortScript,
    Arrival,
    CallHook,
    CallScript,
    HookFailure,
    InterruptScript,
    QueueMode,
    QueueName,
    ReplyScript,
    RunHook,
    StreamFault,
    paired_history,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "assistant_replies",
    "faults",
    "image_blocks",
    "json_values",
    "messages",
    "scripts",
    "text_blocks",
    "thinking_blocks",
    "tool_arguments",
    "tool_calls",
    "transcripts",
    "usages",
]

STOP_REASONS: tuple[StopReason, ...] = get_args(StopReason)
CALL_HOOKS: tuple[CallHook, ...] = get_args(CallHook)
RUN_HOOKS: tuple[RunHook, ...] = get_args(RunHook)
ROLES = ("user", "assistant", "tool_result", "custom")

# Virtual seconds: a few distinct values, so that ties (two things at the same instant)
# are common and shrunk examples read well.
_TIMES = (0.0, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0)
_TIMEOUTS = (0.5, 1.0, 0.1, 3.0)  # tool_timeout values
_DEADLINES = (0.5, 0.05, 0.1, 0.25, 1.0, 2.0, 5.0)


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
) -> st.SearchStrategy[ToolCall]:
    """``ToolCall`` values.

    Args:
        ids: the call ids (default: short non-empty text).
        names: the tool names, a list to pick from or a strategy (default: any text).
        arguments: the JSON-object arguments (default: small JSON objects).
    """
    if names is None:
        name_st: st.SearchStrategy[str] = _text(min_size=1, max_size=12)
    elif isinstance(names, st.SearchStrategy):
        name_st = names
    else:
        name_st = st.sampled_from(list(names))
    return st.builds(
        ToolCall,
        id=ids if ids is not None else _text(min_size=1, max_size=8),
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
) -> st.SearchStrategy[AssistantMessage]:
    """Finished ``AssistantMessage`` values: text, thinking and tool-call blocks.

    Args:
        stop_reasons: the stop reasons to pick from.
        max_calls: the most tool calls in one reply.
        tool_names: names the calls use (default: any text).
        unique_ids: False lets one reply declare an id twice (a model bug the loop must
            survive).
        thinking: include thinking blocks.
    """

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
                tool_calls(ids=call_ids, names=tool_names),
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
    *, max_turns: int = 4, max_calls: int = 3
) -> st.SearchStrategy[tuple[Message, ...]]:
    """Transcripts that keep the pairing invariant: turns of user (or custom) messages,
    replies, and one result per call right after its reply, in declaration order; call
    ids unique across the whole transcript.

    Args:
        max_turns: the most replies.
        max_calls: the most calls in one reply.
    """

    # Lighter blocks than messages(): these transcripts are about structure (and every
    # field's round trip is covered by messages()), and a turn costs ~1 ms to draw.
    short = st.text(max_size=10)
    user_turns = st.builds(
        UserMessage, content=st.tuples(st.builds(Text, text=short)), timestamp=_timestamps()
    )
    notes = st.builds(CustomMessage, kind=st.just("note"), content=short, timestamp=_timestamps())
    names = st.sampled_from(["read", "write", "bash", "grep"])
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
                        content=(Text(text=draw(short)),),
                        is_error=draw(st.booleans()),
                        details=draw(st.none() | arguments),
                        timestamp=draw(_timestamps()),
                    )
                )
        return tuple(out)

    return build()


# --- scripts ----------------------------------------------------------------------------


def scripts(
    *,
    max_replies: int = 5,
    max_calls: int = 4,
    stop_reasons: Sequence[StopReason] = STOP_REASONS,
    duplicate_ids: bool = True,
    unknown_tools: bool = True,
    invalid_arguments: bool = True,
    failures: bool = True,
    timeouts: bool = True,
    progress: bool = True,
    stream_faults: bool = True,
    stream_latency: bool = True,
    arrivals: bool = True,
    aborts: bool = True,
    interrupt: bool = True,
    deadlines: bool = True,
    history: bool = True,
    limits: bool = True,
    hooks: bool = True,
    drivers: Sequence[Literal["channel", "callback"]] = ("channel", "callback"),
) -> st.SearchStrategy[Script]:
    """Whole scenarios for one run (:class:`~trio_agent.testing.Script`).

    Each option switches one family of events on or off (all on by default):

    Args:
        max_replies: the most scripted replies (the model errors once they run out).
        max_calls: the most tool calls in one reply.
        stop_reasons: the replies' stop reasons (``tool_use`` is the most common).
        duplicate_ids: a reply may declare one call id twice.
        unknown_tools: a call may name a tool that does not exist.
        invalid_arguments: a call's arguments may fail the schema.
        failures: a tool may raise, ask to terminate, or hang (hangs only with a timeout).
        timeouts: ``tool_timeout`` may be set.
        progress: tools may report progress.
        stream_faults: a stream may end without ``Done``, or the provider may raise.
        stream_latency: a stream may stay in flight for a while.
        arrivals: steering and follow-up messages may be queued during the run.
        aborts: the run may be aborted at an event or a time, with or without grace.
        interrupt: ``run.interrupt()`` may cut the running batch or reply (the run goes
            on; what ``steer(..., interrupt=True)`` does).
        deadlines: an outer cancel scope may have a deadline.
        history: the run may start from earlier messages (or continue with no prompt).
        limits: ``max_steps``, ``max_concurrency``, sequential execution and
            ``continue_after_length`` may be set.
        hooks: ``before_tool_call``/``after_tool_call`` may block, fail or change a
            call; ``should_stop_after_turn`` may stop the run; a run-level hook
            (transform, poll, ``prepare_next_turn``...) may raise.
        drivers: ``channel`` (``open_agent_loop``) and/or ``callback``
            (``run_agent_loop`` with ``on_event``, used only with no abort and no deadline).
    """
    if not stop_reasons:
        raise ValueError("stop_reasons must not be empty")
    unknown = set(stop_reasons) - set(STOP_REASONS)
    if unknown:
        raise ValueError(f"unknown stop reasons {sorted(unknown)}")
    if not drivers:
        raise ValueError("drivers must not be empty")
    # Weighted toward tool_use, so runs go several turns deep.
    reasons = [r for r in ("tool_use", "tool_use", "tool_use", "stop", "stop") if r in stop_reasons]
    reasons += [r for r in STOP_REASONS if r in stop_reasons and r not in ("tool_use", "stop")]
    if not reasons:
        reasons = list(stop_reasons)

    def chance(draw: st.DrawFn, percent: int) -> bool:
        # Shrinks toward False: the rarer, special case is what shrinking removes.
        return draw(st.integers(0, 99)) >= 100 - percent

    @st.composite
    def build(draw: st.DrawFn) -> Script:
        tool_timeout = _TIMEOUTS[draw(st.integers(0, 3))] if timeouts and chance(draw, 40) else None
        tools = [WORK_TOOL, WORK_TOOL, WORK_TOOL, SERIAL_TOOL]
        if unknown_tools:
            tools.append("missing")
        behaviours = ["ok", "ok", "ok", "ok"]
        if failures:
            behaviours += ["fail", "terminate"] + (["hang"] if tool_timeout is not None else [])

        def call_hook(draw: st.DrawFn) -> CallHook | None:
            return draw(st.sampled_from(CALL_HOOKS)) if hooks and chance(draw, 8) else None

        def reply(draw: st.DrawFn, step: int, last: bool) -> ReplyScript:
            # Mostly a healthy conversation — tool_use replies, then a final stop — so
            # runs go several turns deep; any other reason is the "anomaly" branch.
            usual: StopReason = "stop" if last else "tool_use"
            if usual in stop_reasons and not chance(draw, 20):
                reason = usual
            else:
                reason = draw(st.sampled_from(reasons))
            if max_calls == 0:
                n_calls = 0
            elif reason == "tool_use":
                # A tool_use reply with no call is a model error: rare.
                n_calls = 0 if chance(draw, 2) else draw(st.integers(1, max_calls))
            else:
                # Calls in a stop reply are a model error; in the others, a normal sight.
                with_calls = chance(draw, 10 if reason == "stop" else 50)
                n_calls = draw(st.integers(1, max_calls)) if with_calls else 0
            calls: list[CallScript] = []
            for k in range(n_calls):
                if duplicate_ids and k and chance(draw, 3):
                    cid = calls[draw(st.integers(0, k - 1))].id
                else:
                    cid = f"c{step}.{k}"
                valid = not (invalid_arguments and chance(draw, 10))
                calls.append(
                    CallScript(
                        id=cid,
                        tool=draw(st.sampled_from(tools)),
                        valid_arguments=valid,
                        latency=draw(st.sampled_from(_TIMES)),
                        progress=draw(st.integers(0, 3)) if progress and chance(draw, 40) else 0,
                        behaviour=draw(st.sampled_from(behaviours)),
                        hook=call_hook(draw),
                    )
                )
            fault: StreamFault | None = None
            if stream_faults and chance(draw, 4):
                fault = draw(st.sampled_from(["truncated", "raises"]))
            return ReplyScript(
                stop_reason=reason,
                calls=tuple(calls),
                text=draw(st.sampled_from(["", "Let me see.", "Done!"])),
                latency=draw(st.sampled_from(_TIMES))
                if stream_latency and chance(draw, 40)
                else 0.0,
                fault=fault,
            )

        n_replies = 0 if max_replies == 0 or chance(draw, 5) else draw(st.integers(1, max_replies))
        replies = tuple(reply(draw, step, step == n_replies - 1) for step in range(n_replies))

        prompt: str | None = "go"
        past: tuple[Message, ...] = ()
        if history and chance(draw, 40):
            shape = draw(st.sampled_from(["none", "chat", "tools", "continue", "resume"]))
            if shape == "chat":
                past = paired_history(with_tools=False, pending="none")
            elif shape == "tools":
                past = paired_history(with_tools=True, pending="none")
            elif shape == "continue":
                past = paired_history(with_tools=True, pending="user")
                prompt = draw(st.sampled_from([None, "go"]))
            elif shape == "resume":
                past = paired_history(with_tools=True, pending="results")
                prompt = draw(st.sampled_from([None, "go"]))

        queued: tuple[Arrival, ...] = ()
        steering_mode: QueueMode = "one_at_a_time"
        follow_up_mode: QueueMode = "one_at_a_time"
        if arrivals and chance(draw, 50):
            queue_names: list[QueueName] = ["steer", "follow_up"]
            kinds = draw(st.lists(st.sampled_from(queue_names), min_size=1, max_size=3))
            queued = tuple(
                Arrival(
                    at=draw(st.sampled_from(_TIMES)),
                    queue=kind,
                    text=f"{'steer' if kind == 'steer' else 'follow-up'} {i}",
                )
                for i, kind in enumerate(kinds)
            )
            queue_modes: list[QueueMode] = ["one_at_a_time", "all"]
            steering_mode = draw(st.sampled_from(queue_modes))
            follow_up_mode = draw(st.sampled_from(queue_modes))

        abort = None
        if aborts and chance(draw, 30):
            grace = draw(st.sampled_from([0.1, 0.5])) if chance(draw, 30) else None
            if draw(st.booleans()):
                abort = AbortScript(at_time=draw(st.sampled_from(_TIMES)), grace=grace)
            else:
                abort = AbortScript(after_event=draw(st.integers(0, 60)), grace=grace)
        deadline = draw(st.sampled_from(_DEADLINES)) if deadlines and chance(draw, 25) else None
        interrupts: list[InterruptScript] = []
        if interrupt and chance(draw, 15):
            for _ in range(draw(st.integers(1, 2))):
                if draw(st.booleans()):
                    interrupts.append(InterruptScript(at_time=draw(st.sampled_from(_TIMES))))
                else:
                    interrupts.append(InterruptScript(after_event=draw(st.integers(0, 40))))
        stop_after_turn = draw(st.integers(0, 3)) if hooks and chance(draw, 5) else None
        hook_failure = None
        if hooks and chance(draw, 5):
            hook_failure = HookFailure(
                hook=draw(st.sampled_from(RUN_HOOKS)), at=draw(st.integers(0, 3))
            )

        limit_kwargs: dict[str, Any] = {}
        if limits and chance(draw, 50):
            limit_kwargs = {
                "max_steps": draw(st.sampled_from([32, 1, 2, 3, 5])),
                "tool_execution": draw(st.sampled_from(["parallel", "sequential"])),
                "max_concurrency": draw(st.none() | st.integers(1, 3)),
                "continue_after_length": draw(st.booleans()),
            }
        controlled = abort is not None or deadline is not None or bool(interrupts)
        usable = [d for d in drivers if d == "channel" or not controlled]
        if not usable:
            # Only the callback driver was asked for: it cannot abort, interrupt or time out.
            abort = deadline = None
            interrupts = []
            usable = list(drivers)
        return Script(
            replies=replies,
            prompt=prompt,
            history=past,
            tool_timeout=tool_timeout,
            arrivals=queued,
            abort=abort,
            interrupts=tuple(interrupts),
            deadline=deadline,
            stop_after_turn=stop_after_turn,
            hook_failure=hook_failure,
            chunk_size=draw(st.sampled_from([None, 4, 1])),
            driver=draw(st.sampled_from(usable)),
            steering_mode=steering_mode,
            follow_up_mode=follow_up_mode,
            **limit_kwargs,
        )

    return build()
