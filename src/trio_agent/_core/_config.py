"""What a run starts from and how it behaves: ``Context``, ``LoopConfig``, and the hook
contexts and results through which an application steers a run from the outside."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

import attrs

from ._context import ContextPolicy
from ._messages import (
    AssistantMessage,
    Image,
    Message,
    Text,
    ToolCall,
    ToolResultMessage,
)
from ._model import Model, ModelOptions
from ._tools import Tool, as_tools
from ._validators import as_history, is_str, one_of, seconds

if TYPE_CHECKING:
    from ._deferral import Approver, Defer
    from ._observer import Observer
    from ._tools import ToolOutput

__all__ = [
    "AfterToolCallContext",
    "AfterToolCallResult",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "Context",
    "LoopConfig",
    "NextTurn",
    "RequestContext",
    "TurnContext",
    "maybe_await",
    "trusted_context",
]

T = TypeVar("T")
MaybeAwaitable: TypeAlias = "T | Awaitable[T]"


async def maybe_await(value: Any) -> Any:
    """``value``, awaited first when it is awaitable (a hook may be sync or async).

    Checkpoints only when ``value`` is awaitable and the awaitable does.
    """
    if hasattr(value, "__await__"):
        return await value
    return value


def _context_tools(value: Any) -> tuple[Tool, ...]:
    return as_tools(value, "Context.tools")


def _context_messages(value: Any) -> tuple[Message, ...]:
    return as_history(value, "Context.messages")


@attrs.frozen(kw_only=True)
class Context:
    """What a run starts from. It belongs to the caller and is never mutated.

    A run copies ``messages`` into its own transcript and appends to that copy; the
    result's ``transcript`` is where it ended.

    Attributes:
        system_prompt: the instructions sent with every request ("" for none).
    """

    system_prompt: str = attrs.field(default="", validator=is_str)
    messages: tuple[Message, ...] = attrs.field(default=(), converter=_context_messages)
    """Checked here: a ``str``, or an entry that is not a message, is a ``TypeError``."""
    tools: tuple[Tool, ...] = attrs.field(default=(), converter=_context_tools)
    """Checked here: an entry that is not a :class:`Tool` (a plain function) is a
    ``TypeError`` at construction, pointing at ``@trio_agent.tool``."""


def trusted_context(
    system_prompt: str, messages: tuple[Message, ...], tools: tuple[Tool, ...]
) -> Context:
    """A :class:`Context` of values that were checked where they entered (a run's own
    transcript, an agent's fields), built without running its converters again: a run
    that shows its hooks the conversation each turn does not check the whole transcript
    each turn."""
    context: Context = object.__new__(Context)
    object.__setattr__(context, "system_prompt", system_prompt)
    object.__setattr__(context, "messages", messages)
    object.__setattr__(context, "tools", tools)
    return context


@attrs.frozen(kw_only=True)
class BeforeToolCallContext:
    """What ``LoopConfig.before_tool_call`` is given, once per call, before the call runs.

    The hook runs while the batch is prepared, one call at a time in declaration order,
    after the call was found and its arguments converted and validated. It returns a
    ``BeforeToolCallResult`` to block the call or replace its arguments, ``Defer(reason)``
    to make it wait for a decision (see ``LoopConfig.approver`` and ``resume``), or None
    to let it run as it is. A hook that raises gives that call an error result (outcome
    ``error``); the other calls and the run go on.

    Attributes:
        assistant_message: the reply that declared the call.
        tool_call: the call, as the model declared it (raw arguments).
        context: the conversation as it stands: the run's system prompt and tools, and
            its transcript up to and including ``assistant_message``.
    """

    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: Mapping[str, Any]
    """The validated arguments, converted to the types the tool's schema asks for."""
    context: Context


@attrs.frozen(kw_only=True)
class BeforeToolCallResult:
    """What ``before_tool_call`` decides for one call; the defaults let it run.

    Attributes:
        block: refuse the call: it does not run, and its result is an error with
            ``reason`` (outcome ``blocked``).
        reason: the text of a blocked call's result (default "Tool execution was
            blocked"); what the model reads.
        terminate: with ``block``, the blocked result asks to end the run, as
            ``ToolOutput.terminate`` does (the run ends ``terminated`` when every result
            of the batch asks so).
        args: replacement arguments for the call (when not blocked). They are
            validated again against the tool's schema; invalid ones give the call an
            ``invalid_arguments`` error result.
    """

    block: bool = False
    reason: str | None = None
    terminate: bool = False
    args: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class AfterToolCallContext:
    """What ``LoopConfig.after_tool_call`` is given, once per call whose tool ran.

    The hook runs in the call's own task right after ``execute`` returned or raised —
    not for calls stopped before they ran, timed out or aborted. It returns an
    ``AfterToolCallResult`` to replace parts of the result, or None to keep it. A hook
    that raises makes the call's result an error with its message.

    Attributes:
        assistant_message: the reply that declared the call.
        tool_call: the call, as the model declared it.
        args: the validated arguments the tool ran with.
        result: what the tool returned (an exception it raised is an error output
            saying so).
        is_error: whether that result is an error.
        context: the conversation as it stood when the batch began: the run's system
            prompt and tools, and its transcript up to and including
            ``assistant_message``.
    """

    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: Mapping[str, Any]
    result: ToolOutput
    is_error: bool
    context: Context


@attrs.frozen(kw_only=True)
class AfterToolCallResult:
    """Replace parts of a call's result; ``None`` keeps the field.

    ``details`` must be JSON data, as ``ToolOutput.details``: otherwise the call's result
    is an error saying so (``after_tool_call failed: ...``).

    Attributes:
        content: the new content: a ``str`` (one text block) or text and image blocks.
        details: the new details, JSON data for the application.
        is_error: whether the result is now an error.
        terminate: whether the result now asks to end the run.
        structured_content: the new structured content (JSON data, checked against the
            tool's ``output_schema`` as the tool's own is). When ``content`` is replaced
            without it, the result's structured content is dropped: it may no longer
            say what the content says.
    """

    content: str | Sequence[Text | Image] | None = None
    details: Any = None
    is_error: bool | None = None
    terminate: bool | None = None
    structured_content: Any = None


@attrs.frozen(kw_only=True)
class TurnContext:
    """What ``prepare_next_turn`` and ``should_stop_after_turn`` are given after a turn.

    Both run after the turn's ``TurnEnd`` when the run goes on (not when the turn's
    reply ended the run); one that raises ends the run with ``AgentRunError``.

    Attributes:
        message: the turn's reply.
        tool_results: the results of its calls, in declaration order.
        context: the conversation as it stands: system prompt, tools, and the whole
            transcript so far.
        new_messages: every message the run has added so far, in order.
    """

    message: AssistantMessage
    tool_results: tuple[ToolResultMessage, ...]
    context: Context
    new_messages: tuple[Message, ...]


@attrs.frozen(kw_only=True)
class RequestContext:
    """What ``prepare_request`` is given, right before a model request is sent.

    Attributes:
        context: the conversation the request is built from: system prompt, tools, and
            the whole transcript so far (the messages pending for this request
            included).
        model: the model the request goes to.
        options: the ``ModelOptions`` the request carries.
    """

    context: Context
    model: Model
    options: ModelOptions


@attrs.frozen(kw_only=True)
class NextTurn:
    """What ``prepare_next_turn`` or ``prepare_request`` may swap for the rest of the run
    (``None`` keeps it).

    Attributes:
        context: a new system prompt, tools and transcript; the run goes on from its
            ``messages`` (so a hook can trim or summarise the history).
        model: the model for the next requests.
        options: the ``ModelOptions`` for the next requests.
    """

    context: Context | None = None
    model: Model | None = None
    options: ModelOptions | None = None


Messages: TypeAlias = Sequence[Message]


def _check_policy(_config: object, _attribute: object, value: Any) -> None:
    if value is not None and not isinstance(value, ContextPolicy):
        raise TypeError(
            "LoopConfig.context must be a context policy (an object with an async "
            "compact() method, like trio_agent.context.KeepRecent), not "
            f"{type(value).__name__}"
        )


@attrs.frozen(kw_only=True)
class LoopConfig:
    """How a run behaves. Every field is optional.

    Hooks may be plain or async callables (an awaitable they return is awaited).

    Attributes:
        max_steps: the most model requests one run makes; then it ends ``max_steps``.
        tool_execution: ``"sequential"`` runs every batch one call at a time.
        max_concurrency: the most calls of one batch running at once.
        tool_timeout: seconds a call may run (``Tool.timeout`` overrides it).
        stream_idle_timeout: seconds a model stream may stay silent; then the reply ends
            with stop reason ``error``.
        run_timeout: seconds the whole run may take, from its start; then it ends with
            reason ``timeout``, cleaned up as an abort is: the reply being streamed is
            kept (stop reason ``aborted``), finished calls keep their results, every
            other call gets an ``aborted`` result saying the run timed out, no request
            is made after it, and ``AgentEnd`` comes last, once. A normal end: the run
            returns its result (no ``Cancelled``, unlike an outer cancel scope).
        convert_to_llm: shapes the transcript for the model, per request (default: drop
            ``CustomMessage``).
        transform_context: runs before ``convert_to_llm``, per request. Both must return
            a sequence of messages: anything else fails the run (``AgentRunError`` naming
            the hook) before the request is sent.
        before_tool_call: a per-call hook run before a call runs, given a
            ``BeforeToolCallContext``; may block the call with a reason or replace its
            arguments, or return ``Defer(reason)`` to make it wait for a decision. One
            that raises, or returns anything but None, a ``BeforeToolCallResult`` or a
            ``Defer``, fails that call only (an error result saying so).
        after_tool_call: a per-call hook run after a call's tool ran, given an
            ``AfterToolCallContext``; may replace parts of its result. One that raises,
            or returns anything but None or an ``AfterToolCallResult``, fails that call
            only.
        get_steering_messages: polled for steering messages after each turn (and
            before the first); what it returns is appended before the next request. A
            poll returns what ``prompts`` accepts (a sequence of messages, or one
            ``str``), or None or an empty sequence for nothing; anything else — or a
            message holding a value that is not JSON data — fails the run
            (``AgentRunError`` naming the hook) before any of it enters the transcript.
        get_follow_up_messages: polled, the same way, when the model has nothing left
            to answer; messages it returns start another turn instead of ending the run.
        prepare_next_turn: swap context, model or options before the next request
            (returns a ``NextTurn`` or None; anything else fails the run).
        prepare_request: called right before every model request, the first included,
            once per request, given a ``RequestContext``: the messages pending for the
            request are appended (and their events emitted) before it runs. It returns a
            ``NextTurn`` — the context, model or options to use for this request and the
            rest of the run — or None to keep them; anything else, or an exception it
            raises, fails the run (``AgentRunError``, the transcript paired). It does
            not poll the queues. ``transform_context`` and ``convert_to_llm`` run after
            it, on the context it chose.
        should_stop_after_turn: end the run (reason ``stopped``) after a turn.
        continue_after_length: a truncated reply with tool calls asks the model to
            re-issue them instead of ending the run.
        model_options: passed into each ``ModelRequest``.
        cleanup_timeout: seconds the shielded clean-up after an outer cancel may spend
            delivering its events.
        max_input_tokens: a budget of prompt tokens for one run, checked before each
            request after the first. The run ends with reason ``usage_limit``
            (transcript paired, nothing left unanswered) when the prompt tokens used so
            far (input plus cache read and write) plus those of the last request — the
            least the next one sends, since the transcript only grows — exceed it.
        max_output_tokens: a budget of output tokens for one run: the run ends with
            reason ``usage_limit`` before the next request once the output tokens used
            so far have reached it. A single request may still go over (the budget is
            not sent to the model: use ``ModelOptions.max_tokens``).
        max_cost: a budget in USD for one run: the run ends with reason
            ``usage_limit`` before the next request once its replies cost that much
            (each priced by its model and provider from the ``genai-prices`` table, the
            ``cost`` extra; see ``Usage.cost``). A reply that cannot be priced (a model
            the table does not know, or no ``genai-prices``) ends the run the same way:
            a money budget that cannot be counted is not taken as unspent. A single
            request may still go over.
        observer: told about the run, each model request and each tool call (e.g.
            ``trio_agent.telemetry.OpenTelemetry``); None observes nothing.
        approver: asked, while the run waits, about each call that would be deferred
            (its tool's ``approval``, or ``before_tool_call`` returned ``Defer``), one
            at a time in declaration order during the batch's preparation; given the
            ``DeferredCall``, it returns ``Approve()`` (the call runs; edited arguments
            are validated again), ``Deny(reason)`` or ``Result(content)`` — or None to
            defer the call. One that raises gives the call an error result. An abort or
            a cancel while it waits ends the run as it would a running tool: the call
            gets an ``aborted`` result. Without an approver such calls are deferred.
        approval_timeout: seconds the ``approver`` may take for one call; then the call
            is deferred instead (None: no limit).
        context: a context policy (``trio_agent.context``: ``KeepRecent``,
            ``ElideToolOutputs``, ``Summarize``): it shapes the history each request
            shows the model (before ``transform_context``), and reports each compaction
            as a ``ContextCompacted`` event; the transcript itself is never changed.
            When the provider refuses a request as too long for the context window, the
            run asks the policy to compact harder and sends the request again (a new
            turn); a second refusal in a row ends the run ``context_overflow``. Without
            a policy the first refusal ends it so.
    """

    max_steps: int = attrs.field(default=32, validator=attrs.validators.ge(1))
    tool_execution: Literal["parallel", "sequential"] = attrs.field(
        default="parallel", validator=one_of("parallel", "sequential")
    )
    max_concurrency: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(1))
    )
    tool_timeout: float | None = attrs.field(default=None, validator=seconds(optional=True))
    stream_idle_timeout: float | None = attrs.field(default=None, validator=seconds(optional=True))
    run_timeout: float | None = attrs.field(default=None, validator=seconds(optional=True))
    convert_to_llm: Callable[[Messages], MaybeAwaitable[Messages]] | None = None
    transform_context: Callable[[Messages], MaybeAwaitable[Messages]] | None = None
    before_tool_call: (
        Callable[[BeforeToolCallContext], MaybeAwaitable[BeforeToolCallResult | Defer | None]]
        | None
    ) = None
    after_tool_call: (
        Callable[[AfterToolCallContext], MaybeAwaitable[AfterToolCallResult | None]] | None
    ) = None
    get_steering_messages: Callable[[], MaybeAwaitable[Messages]] | None = None
    get_follow_up_messages: Callable[[], MaybeAwaitable[Messages]] | None = None
    prepare_next_turn: Callable[[TurnContext], MaybeAwaitable[NextTurn | None]] | None = None
    prepare_request: Callable[[RequestContext], MaybeAwaitable[NextTurn | None]] | None = None
    should_stop_after_turn: Callable[[TurnContext], MaybeAwaitable[bool]] | None = None
    continue_after_length: bool = False
    model_options: ModelOptions = attrs.field(factory=ModelOptions)
    cleanup_timeout: float = attrs.field(default=5.0, validator=seconds(optional=False, zero=True))
    max_input_tokens: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(1))
    )
    max_output_tokens: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(1))
    )
    max_cost: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.gt(0))
    )
    observer: Observer | None = None
    approver: Approver | None = None
    approval_timeout: float | None = attrs.field(default=None, validator=seconds(optional=True))
    context: ContextPolicy | None = attrs.field(default=None, validator=_check_policy)


if not TYPE_CHECKING:  # resolve the forward references attrs keeps as strings
    from ._deferral import Approver, Defer
    from ._observer import Observer
    from ._tools import ToolOutput
