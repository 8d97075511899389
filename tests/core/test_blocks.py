"""A reply's blocks are built by one builder, for the loop and the providers alike.

The loop's stream accumulator reads a model's events; the providers' reply builder makes
them. Both keep each open block as the one block builder of ``_core._blocks``, so a
reply cut anywhere keeps the same content and the same error message on both sides, a
tool call still streaming shows the same (its id and name, no arguments yet), and a
tool call's argument text that is not a JSON object never becomes arguments.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.loop import Recorder, call, ctx, make_tool, prompt, tool_use
from trio_agent import (
    AssistantEvent,
    LoopConfig,
    MessageUpdate,
    Text,
    Thinking,
    ToolCall,
    run_agent_loop,
)
from trio_agent._core._blocks import CALL, TEXT, Block, keep_partial, parse_arguments
from trio_agent._run._stream import StreamAccumulator
from trio_agent.providers._reply import ReplyBuilder, StreamFault
from trio_agent.testing import ScriptedModel


def _steps(builder: ReplyBuilder) -> list[Any]:
    """A reply made through a provider's builder, step by step: thinking, text, a
    finished call (its arguments in two fragments), a call still streaming."""
    return [
        lambda: builder.thinking(0, "let me "),
        lambda: builder.thinking(0, "see"),
        lambda: builder.signature(0, "sig"),
        lambda: builder.text(1, "hi "),
        lambda: builder.text(1, "there"),
        lambda: builder.close(0) + builder.close(1),
        lambda: builder.call_start(("call", 0), "c1", "probe"),
        lambda: builder.call_delta(("call", 0), '{"x": '),
        lambda: builder.call_delta(("call", 0), "1}"),
        lambda: builder.close(("call", 0)),
        lambda: builder.call_start(("call", 1), "c2", "probe"),
        lambda: builder.call_delta(("call", 1), '{"path": "RE'),
    ]


def _made(cut: int) -> tuple[ReplyBuilder, list[AssistantEvent]]:
    """A builder that took the first ``cut`` steps, and the events it made."""
    builder = ReplyBuilder(model="m", provider="p")
    return builder, [e for step in _steps(builder)[:cut] for e in step()]


def test_a_reply_cut_anywhere_keeps_the_same_content_in_the_loop_and_a_provider() -> None:
    steps = len(_steps(ReplyBuilder(model="m", provider="p")))
    for cut in range(steps + 1):
        builder, events = _made(cut)
        acc = StreamAccumulator(model="m", provider="p")
        for event in events:
            acc.feed(event)
        provider_kept = builder.fail("cut").message
        loop_kept = acc.fail("cut")
        assert loop_kept.content == provider_kept.content, cut
        assert loop_kept.error_message == provider_kept.error_message, cut
    # Cut at the end: the thinking with its signature, the text, the finished call;
    # the call still streaming dropped and named.
    assert provider_kept.content == (
        Thinking(thinking="let me see", signature="sig"),
        Text(text="hi there"),
        ToolCall(id="c1", name="probe", arguments={"x": 1}),
    )
    assert provider_kept.error_message == "cut; unfinished tool call(s) dropped: probe (c2)"


async def test_a_call_still_streaming_shows_no_arguments_until_it_ends() -> None:
    # After its one delta the argument text is whole JSON, but the call is not finished
    # before its ToolCallEnd: the partial message shows it without arguments until then.
    model = ScriptedModel([tool_use(call("a", x=1))])
    rec = Recorder()
    await run_agent_loop(prompt(), ctx(make_tool()), model, LoopConfig(max_steps=1), on_event=rec)
    shown = {u.event.type: u.message.tool_calls for u in rec.of(MessageUpdate)}
    bare = (ToolCall(id="a", name="probe", arguments={}),)
    assert shown["toolcall_start"] == bare
    assert shown["toolcall_delta"] == bare
    assert shown["toolcall_end"] == (call("a", x=1),)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("{x", "malformed argument JSON"),
        ('{"path": "RE', "malformed argument JSON"),
        ("[1, 2]", "not a JSON object"),
        ('"ls"', "not a JSON object"),
        ("null", "not a JSON object"),
    ],
)
def test_argument_text_that_is_not_a_json_object_never_becomes_arguments(
    raw: str, why: str
) -> None:
    with pytest.raises(ValueError, match=why) as caught:
        parse_arguments(raw, "ls (c1)")
    assert str(caught.value).startswith("tool call ls (c1) has ")
    # A provider closing such a call fails the reply; the call is dropped and named.
    builder = ReplyBuilder(model="m", provider="p")
    builder.text(0, "Listing.")
    builder.call_start(1, "c1", "ls")
    builder.call_delta(1, raw)
    with pytest.raises(StreamFault, match=why) as fault:
        builder.close_all()
    failed = builder.fail(str(fault.value)).message
    assert failed.content == (Text(text="Listing."),)
    assert failed.error_message is not None
    assert failed.error_message.endswith("; unfinished tool call(s) dropped: ls (c1)")


@pytest.mark.parametrize("raw", ["", "  ", "{}", ' {"a": [1]} '])
def test_empty_argument_text_means_no_arguments(raw: str) -> None:
    expected = {"a": [1]} if "a" in raw else {}
    assert parse_arguments(raw, "ls (c1)") == expected
    block = Block(CALL, 0)
    block.call_id, block.name = "c1", "ls"
    block.add(raw)
    assert block.finish() == ToolCall(id="c1", name="ls", arguments=expected)


def test_a_high_surrogate_is_held_until_its_low_half_arrives() -> None:
    block = Block(TEXT, 0)
    assert block.add("hi \ud83d") == "hi "
    assert block.partial() == Text(text="hi \ud83d")  # a half alone is shown as is
    assert block.add("\ude00!") == "😀!"
    assert block.finish() == Text(text="hi 😀!")
    # Without holding (the loop keeps a model's deltas as sent), reading joins the pair.
    loose = Block(TEXT, 0)
    loose.parts += ["hi \ud83d", "\ude00!"]
    assert loose.partial(1) == Text(text="hi \ud83d")
    assert loose.partial() == Text(text="hi 😀!")


def test_keep_partial_drops_open_calls_and_keeps_open_text() -> None:
    text = Block(TEXT, 0)
    text.parts.append("half")
    open_call = Block(CALL, 2)
    open_call.call_id, open_call.name = "c2", "read"
    done = ToolCall(id="c1", name="ls", arguments={})
    kept, why = keep_partial([text, done, open_call], "stopped")
    assert kept == (Text(text="half"), done)
    assert why == "stopped; unfinished tool call(s) dropped: read (c2)"
    assert keep_partial([done], "stopped") == ((done,), "stopped")
