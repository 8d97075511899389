"""What enters a run or an agent, checked once, where it enters.

Theory of operation
-------------------
A value is checked at the door it comes through, and nothing behind that door checks it
again: the runner, the batch and the agent's runs trust what they are handed.

==========================================  ===============================================
door                                        check
==========================================  ===============================================
``run_agent_loop``, ``open_agent_loop``      :func:`check_run`: the prompts
                                            (:func:`as_prompts`), the context, the model,
                                            the config, and something to continue from
a value a user builds (``Context``,          its attrs validators and converters
``LoopConfig``, ``Tool``, the ``Agent``'s     (``_validators``), when built or assigned
fields...)
``Agent.prompt``                            :func:`as_agent_prompts`
``Agent.steer``, ``Agent.follow_up``         :func:`as_message`
a steering or follow-up poll's result       :func:`as_prompts` (an agent's own polls hand
                                            out messages its queues took checked)
``transform_context``, ``convert_to_llm``    ``as_history``
the other hooks' results                    :func:`hook_returned`
a tool's (or ``after_tool_call``'s) content  :func:`result_content`; ``details`` by
                                            ``check_json``
a call's arguments                          ``check_arguments``, once per call: in the
                                            batch, or in a ``@tool``'s ``execute`` when it
                                            is called directly
what a writer is given (``dumps``,           ``as_history``
``write_transcript``...)
==========================================  ===============================================

A message's free-form values (a custom message's content and details, a result's
details, a call's arguments) must be JSON data a transcript can hold: prompts and queued
messages are checked for it as they enter (``check_message``), so a sink never fails on
them later. Nothing here is a checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from ._config import Context, LoopConfig
from ._errors import AgentUsageError
from ._messages import MESSAGE_TYPES, AssistantMessage, Image, Message, Text, UserMessage
from ._serde import check_message
from ._validators import NOT_A_SEQUENCE, as_history, describe_value

__all__ = [
    "as_agent_prompts",
    "as_message",
    "as_prompts",
    "check_loop_config",
    "check_model",
    "check_run",
    "hook_returned",
    "result_content",
]

T = TypeVar("T")


def as_message(message: object, what: str = "the message") -> Message:
    """``message`` as a message: a ``str`` becomes a user message.

    Raises:
        TypeError: neither a message nor a ``str``, or a message holding a value a
            transcript cannot store (``what`` names it).
    """
    if isinstance(message, str):
        return UserMessage.text(message)
    if isinstance(message, MESSAGE_TYPES):
        check_message(message, what)
        return message
    raise TypeError(f"expected a message or a str, got {describe_value(message)}")


def as_prompts(prompts: object, what: str = "prompts") -> list[Message]:
    """``prompts`` — a sequence of messages, or one ``str`` — as a list of messages.

    A ``str`` is one user message. Each message's type is checked, and its free-form
    values (``check_message``), so that a wrong value fails before anything runs rather
    than deep inside a run.

    Args:
        what: how error messages name ``prompts`` (a poll's result, say).

    Raises:
        TypeError: ``prompts`` is not a ``str`` or a sequence of messages (a bare
            message, bytes, a mapping, a list holding a non-message...), or a message
            holds a value a transcript cannot store; the message names what was passed.
    """
    if isinstance(prompts, str):
        return [UserMessage.text(prompts)]
    if isinstance(prompts, MESSAGE_TYPES):
        raise TypeError(
            f"{what} must be a sequence of messages or a str, not a bare "
            f"{type(prompts).__name__}: pass [message]"
        )
    if not isinstance(prompts, Sequence) or isinstance(prompts, NOT_A_SEQUENCE):
        raise TypeError(
            f"{what} must be a sequence of messages or a str, not {describe_value(prompts)}"
        )
    out = list(as_history(prompts, what))
    for i, message in enumerate(out):
        check_message(message, f"{what}[{i}]")
    return out


def as_agent_prompts(message: object) -> list[Message]:
    """What ``Agent.prompt(message)`` sends, before the queued steering: a ``str`` or a
    message is one, a sequence of them is each (a ``str`` in it a user message).

    Raises:
        TypeError: not a str, a message or a sequence of them; or a message holding a
            value a transcript cannot store.
        AgentUsageError: an empty sequence.
    """
    if isinstance(message, (str, *MESSAGE_TYPES)):
        prompts = [as_message(message)]
    elif isinstance(message, Sequence) and not isinstance(message, bytes | bytearray):
        prompts = [as_message(m) for m in message]
    else:
        raise TypeError(
            f"prompt() takes a str, a message or a sequence of them, not {describe_value(message)}"
        )
    if not prompts:
        raise AgentUsageError("prompt() needs a message; to resume, call continue_()")
    return prompts


def check_model(model: object, what: str = "model") -> None:
    """Raises TypeError, naming ``what`` and the value, unless ``model`` has a callable
    ``stream`` (the ``Model`` protocol): caught where a run or an agent is made, not at
    its first request."""
    if not callable(getattr(model, "stream", None)):
        raise TypeError(
            f"{what} must be a Model (an object with a stream(request) method, such as a "
            f"provider or ScriptedModel), not {describe_value(model)}"
        )


def check_loop_config(config: object) -> None:
    """Raises TypeError naming the value unless ``config`` is a ``LoopConfig`` (a run
    or an agent checks it when given, not at the first field it reads)."""
    if not isinstance(config, LoopConfig):
        raise TypeError(f"config must be a trio_agent.LoopConfig, not {describe_value(config)}")


def check_run(prompts: object, context: object, model: object, config: object) -> list[Message]:
    """The door check of a run (``run_agent_loop``, ``open_agent_loop``): returns the
    prompts as a list of messages (see :func:`as_prompts`) once each of ``context``,
    ``model`` and ``config`` is what it says, so that a wrong one is a ``TypeError``
    naming it before anything runs, not an ``AttributeError`` at the first request.

    Raises:
        TypeError: a wrong prompt, context, model or config.
        AgentUsageError: no prompts, and a context that does not end in a user,
            tool-result or custom message (nothing to continue from).
    """
    checked = as_prompts(prompts)
    if not isinstance(context, Context):
        raise TypeError(f"context must be a trio_agent.Context, not {type(context).__name__}")
    check_model(model)
    check_loop_config(config)
    if not checked:
        last = context.messages[-1] if context.messages else None
        if last is None or type(last) is AssistantMessage:
            raise AgentUsageError(
                "nothing to continue from: with no prompts, the context must end in a "
                "user, tool-result or custom message (pass a prompt instead)"
            )
    return checked


def hook_returned(hook: str, value: object, kind: type[T]) -> T | None:
    """``value``, what the hook named ``hook`` returned, when it is None or a ``kind``.

    Raises:
        TypeError: anything else, naming the hook and the value.
    """
    if value is None or isinstance(value, kind):
        return value
    raise TypeError(f"{hook} returned {describe_value(value)}; expected None or {kind.__name__}")


def result_content(content: str | Sequence[Text | Image]) -> tuple[Text | Image, ...]:
    """``content`` as result blocks, checked where a tool (or a hook) hands it over.

    Raises:
        TypeError: ``content`` is not a ``str`` or a sequence of ``Text``/``Image``
            blocks with ``str`` fields (bytes, a dict, a list holding a str...). Such a
            value would make the transcript unloadable, so it becomes that call's error.
    """
    if isinstance(content, str):
        return (Text(text=content),)
    given: object = content  # checked at run time, whatever the annotations say
    if not isinstance(given, list | tuple) and (
        not isinstance(given, Sequence) or isinstance(given, bytes | bytearray)
    ):
        raise TypeError(
            f"tool result content must be a str or a sequence of Text/Image blocks, "
            f"not {type(given).__name__}"
        )
    for i, block in enumerate(content):
        # The annotations say what a block should be; this checks what it is.
        fields: tuple[object, ...]
        if type(block) is Text:
            fields = (block.text, "" if block.signature is None else block.signature)
        elif type(block) is Image:
            fields = (block.data, block.mime_type)
        else:
            raise TypeError(
                f"tool result content[{i}] is a {type(block).__name__}, not a Text or Image block"
            )
        if not all(isinstance(f, str) for f in fields):
            raise TypeError(
                f"tool result content[{i}]: a {type(block).__name__} whose fields are not all str"
            )
    return tuple(content)
