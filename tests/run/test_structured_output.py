"""Structured output (``output_type=``): each asking mode, retries with the exact error
path, the ``output_invalid`` end, and a transcript paired throughout."""

from __future__ import annotations

import datetime
import decimal
import itertools
import json
import pathlib
import uuid
from typing import Any, Literal

import attrs
import pytest
import trio
import trio.testing

from trio_agent import (
    AgentUsageError,
    AssistantMessage,
    LoopConfig,
    OutputError,
    StructuredOutput,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    check_transcript,
    open_agent,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent._core import Message, from_jsonable, to_jsonable
from trio_agent._core import events as ev
from trio_agent._core._output import output_converter
from trio_agent.testing import ScriptedModel

from ..kit.loop import (
    Recorder,
    assert_consistent,
    call,
    ctx,
    make_tool,
    reply,
    results_of,
    text_of,
    tool_use,
)


@attrs.frozen
class Item:
    name: str
    price: float


@attrs.frozen
class Order:
    """An order read from an email."""

    customer: str
    items: list[Item]
    rush: bool = False


GOOD = {"customer": "Ada", "items": [{"name": "a", "price": 1.5}, {"name": "b", "price": 2}]}
VALUE = Order(customer="Ada", items=[Item("a", 1.5), Item("b", 2.0)])
BAD_PRICE = {
    "customer": "Ada",
    "items": [{"name": "a", "price": 1}, {"name": "b", "price": 2}, {"name": "c", "price": "x"}],
}


def answer(args: dict[str, Any], id: str = "f1", name: str = "final_result") -> AssistantMessage:
    return tool_use(call(id, name, **args))


def text_answer(value: Any) -> AssistantMessage:
    return reply(json.dumps(value))


async def run(
    model: ScriptedModel, output_type: Any, *tools: Any, **kwargs: Any
) -> tuple[Any, Recorder]:
    recorder = Recorder()
    with trio.fail_after(5):
        result = await run_agent_loop(
            "extract", ctx(*tools), model, on_event=recorder, output_type=output_type, **kwargs
        )
    assert_consistent(result, recorder.events, model.requests)
    return result, recorder


# --- tool mode -----------------------------------------------------------------------


async def test_tool_mode_ends_with_the_typed_value() -> None:
    model = ScriptedModel([answer(GOOD)])
    result, recorder = await run(model, Order)
    assert result.reason == "stop"
    assert result.output == VALUE
    request = model.requests[0]
    assert request.output is not None
    assert request.output.mode == "tool"
    final = request.tools[-1]
    assert final.name == "final_result"
    assert final.parameters["required"] == ["customer", "items"]
    assert "An order read from an email." in final.description
    # The raw arguments stay in the transcript, and the call has its result.
    assert result.messages[1].tool_calls[0].arguments == GOOD
    assert text_of(result.messages[2]) == "Final answer accepted."
    ends = recorder.of(ev.ToolExecutionEnd)
    assert [(e.tool_name, e.outcome) for e in ends] == [("final_result", "ok")]


async def test_invalid_answer_is_sent_back_with_its_path() -> None:
    model = ScriptedModel([answer(BAD_PRICE, "f1"), answer(GOOD, "f2")])
    result, recorder = await run(model, Order)
    assert result.reason == "stop"
    assert result.output == VALUE
    sent_back = model.requests[1].messages[-1]
    assert isinstance(sent_back, ToolResultMessage)
    assert sent_back.is_error
    assert sent_back.tool_call_id == "f1"
    assert "items[2].price: expected a number" in text_of(sent_back)
    assert "Call final_result again" in text_of(sent_back)
    outcomes = [e.outcome for e in recorder.of(ev.ToolExecutionEnd)]
    assert outcomes == ["invalid_arguments", "ok"]


async def test_retries_exhausted_end_output_invalid() -> None:
    missing = {"items": []}
    model = ScriptedModel([answer(missing, f"f{i}") for i in range(3)])
    result, _ = await run(model, StructuredOutput(Order, retries=2))
    assert result.reason == "output_invalid"
    assert model.request_count == 3
    assert result.error_message == (
        "the output was still invalid after 2 retries: customer: required field missing"
    )
    # The last call is answered too: the transcript is paired.
    last = result.messages[-1]
    assert isinstance(last, ToolResultMessage)
    assert last.tool_call_id == "f2"
    assert "no retries left" in text_of(last)
    with pytest.raises(OutputError, match=r"output_invalid.*customer: required field missing"):
        _ = result.output


async def test_zero_retries() -> None:
    model = ScriptedModel([answer({"items": []})])
    result, _ = await run(model, StructuredOutput(Order, retries=0))
    assert result.reason == "output_invalid"
    assert model.request_count == 1


async def test_a_reply_without_the_final_call_is_asked_again() -> None:
    model = ScriptedModel([reply("here it is: Ada"), answer(GOOD)])
    result, _ = await run(model, Order)
    assert result.output == VALUE
    nudge = model.requests[1].messages[-1]
    assert isinstance(nudge, UserMessage)
    assert "calling the final_result tool" in nudge.content[0].text  # type: ignore[union-attr]


async def test_other_tools_run_first_and_siblings_of_the_answer_are_skipped() -> None:
    lookup = make_tool("lookup")
    model = ScriptedModel(
        [
            tool_use(call("l1", "lookup")),
            tool_use(call("f1", "final_result", **GOOD), call("l2", "lookup")),
        ]
    )
    result, recorder = await run(model, Order, lookup)
    assert result.output == VALUE
    outcomes = {e.call_id: e.outcome for e in recorder.of(ev.ToolExecutionEnd)}
    assert outcomes == {"l1": "ok", "f1": "ok", "l2": "skipped"}


@pytest.mark.parametrize(
    ("refused", "outcome", "said"),
    [
        # Answered inside the batch, beside its sibling: an error result of the batch.
        (call("f1", "final_result", **BAD_PRICE), "error", "items[2].price: expected a number"),
        # Argument text that is not JSON: the batch never runs the call.
        (
            ToolCall(id="f1", name="final_result", raw_arguments='{"customer": "Ada", "ite'),
            "invalid_arguments",
            "malformed argument JSON (Unterminated string",
        ),
    ],
    ids=["invalid", "malformed"],
)
async def test_siblings_run_when_the_answer_is_sent_back(
    refused: ToolCall, outcome: str, said: str
) -> None:
    lookup = make_tool("lookup")
    model = ScriptedModel([tool_use(refused, call("l1", "lookup")), answer(GOOD, "f2")])
    result, recorder = await run(model, Order, lookup)
    assert result.output == VALUE
    outcomes = {e.call_id: e.outcome for e in recorder.of(ev.ToolExecutionEnd)}
    assert outcomes == {"f1": outcome, "l1": "ok", "f2": "ok"}
    sent_back = results_of(model.requests[1].messages)["f1"]
    assert sent_back.is_error
    assert said in text_of(sent_back)
    # The results keep the calls' order.
    assert [m.tool_call_id for m in model.requests[1].messages[-2:]] == ["f1", "l1"]


async def test_a_tool_with_the_final_answer_name_is_refused() -> None:
    with pytest.raises(AgentUsageError, match="final_result"):
        await run_agent_loop(
            "x", ctx(make_tool("final_result")), ScriptedModel(), output_type=Order
        )


async def test_a_non_object_output_is_wrapped() -> None:
    model = ScriptedModel([answer({"response": ["a", "b"]})])
    result, _ = await run(model, list[Literal["a", "b"]])
    assert result.output == ["a", "b"]
    assert model.requests[0].tools[-1].parameters["required"] == ["response"]


async def test_a_plain_schema_gives_the_json_value() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    model = ScriptedModel([answer({"n": "1"}, "f1"), answer({"n": 1}, "f2")])
    result, _ = await run(model, schema)
    assert result.output == {"n": 1}
    assert "n: expected an integer" in text_of(model.requests[1].messages[-1])  # type: ignore[arg-type]


async def test_without_output_type_the_output_is_none() -> None:
    model = ScriptedModel([reply("hi")])
    result, _ = await run(model, None)
    assert result.output is None
    assert model.requests[0].output is None


async def test_the_run_ending_first_has_no_output() -> None:
    model = ScriptedModel([reply("boom", "error")])
    result, _ = await run(model, Order)
    assert result.reason == "error"
    with pytest.raises(OutputError, match=r"the run ended \(error\) without a valid output"):
        _ = result.output


# --- text modes ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["prompted", "native"])
async def test_text_modes_read_the_reply(mode: Any) -> None:
    model = ScriptedModel([text_answer(BAD_PRICE), reply(f"```json\n{json.dumps(GOOD)}\n```")])
    result, _ = await run(model, StructuredOutput(Order, mode=mode))
    assert result.output == VALUE
    first = model.requests[0]
    assert first.output is not None
    assert first.output.mode == mode
    assert [t.name for t in first.tools] == []  # no final-answer tool
    if mode == "prompted":
        assert '"customer"' in first.system_prompt
        assert first.system_prompt.startswith("sys")
    else:
        assert first.system_prompt == "sys"
    retry = model.requests[1].messages[-1]
    assert isinstance(retry, UserMessage)
    assert "items[2].price: expected a number" in retry.content[0].text  # type: ignore[union-attr]


async def test_text_mode_bad_json_is_sent_back() -> None:
    model = ScriptedModel([reply('{"customer": "Ada", "items": ['), text_answer(GOOD)])
    result, _ = await run(model, StructuredOutput(Order, mode="prompted"))
    assert result.output == VALUE
    retry = model.requests[1].messages[-1]
    assert "$: the answer is not valid JSON" in retry.content[0].text  # type: ignore[union-attr]


async def test_native_mode_drops_the_nulls_strict_mode_forces() -> None:
    model = ScriptedModel([text_answer({**GOOD, "rush": None})])
    result, _ = await run(model, StructuredOutput(Order, mode="native"))
    assert result.output == VALUE  # rush took its default
    asked = model.requests[0].output
    assert asked is not None
    assert asked.strict_schema is not None
    assert asked.strict_schema["required"] == ["customer", "items", "rush"]


async def test_text_mode_exhausted() -> None:
    model = ScriptedModel([reply("no") for _ in range(2)])
    result, _ = await run(model, StructuredOutput(Order, mode="prompted", retries=1))
    assert result.reason == "output_invalid"
    assert result.error_message is not None
    assert result.error_message.startswith("the output was still invalid after 1 retry: $:")
    assert isinstance(result.messages[-1], AssistantMessage)


async def test_max_steps_ends_a_run_still_retrying() -> None:
    model = ScriptedModel([answer({}, f"f{i}") for i in range(5)])
    result, _ = await run(model, StructuredOutput(Order, retries=4), config=LoopConfig(max_steps=2))
    assert result.reason == "max_steps"
    with pytest.raises(OutputError):
        _ = result.output


# --- open_agent_loop and cancellation ------------------------------------------------


async def test_open_agent_loop_gives_the_output() -> None:
    model = ScriptedModel([answer(BAD_PRICE), answer(GOOD, "f2")])
    async with open_agent_loop("x", ctx(), model, output_type=Order) as handle:
        async for _ in handle.events:
            pass
    assert handle.result is not None
    assert handle.result.output == VALUE


REFUSED = {
    "invalid": call("f1", "final_result", **BAD_PRICE),
    "malformed": ToolCall(id="f1", name="final_result", raw_arguments='{"customer": "Ada" "i'),
}
"""A refused final-answer call of each kind: arguments the schema rejects, argument text
that is not JSON."""


@pytest.mark.parametrize("kind", list(REFUSED))
async def test_abort_during_a_retry_keeps_the_transcript_paired(kind: str) -> None:
    model = ScriptedModel([tool_use(REFUSED[kind]), answer(GOOD, "f2")])
    pause = model.pause_at(1, 0)  # the retried request's stream
    recorder = Recorder()
    async with open_agent_loop("x", ctx(), model, output_type=Order) as handle:
        async with trio.open_nursery() as nursery:

            async def drain() -> None:
                async for event in handle.events:
                    recorder(event)

            nursery.start_soon(drain)
            with trio.fail_after(5):
                await pause.reached.wait()
            handle.abort("stop it")
    result = handle.result
    assert result is not None
    assert result.reason == "aborted"
    assert_consistent(result, recorder.events, model.requests)
    assert results_of(result.messages)["f1"].is_error
    with pytest.raises(OutputError):
        _ = result.output


@pytest.mark.parametrize("kind", list(REFUSED))
async def test_outer_cancel_during_a_retry_keeps_the_transcript_paired(
    autojump_clock: trio.testing.MockClock, kind: str
) -> None:
    lookup = make_tool("lookup", execute=_forever)
    model = ScriptedModel([tool_use(REFUSED[kind], call("l1", "lookup"))])
    recorder = Recorder()
    with trio.move_on_after(1):
        await run_agent_loop("x", ctx(lookup), model, on_event=recorder, output_type=Order)
    end = recorder.events[-1]
    assert isinstance(end, ev.AgentEnd)
    assert end.reason == "aborted"
    # The refused answer and the cancelled sibling both have their results.
    results = {m.tool_call_id: m for m in end.messages if isinstance(m, ToolResultMessage)}
    assert set(results) == {"f1", "l1"}
    check_transcript(end.messages)


# --- malformed argument JSON (tool mode) ---------------------------------------------


def malformed(raw: str, id: str = "f1", name: str = "final_result") -> AssistantMessage:
    """A reply whose call's argument text is not a JSON object (as a provider keeps the
    final-answer call's)."""
    return tool_use(ToolCall(id=id, name=name, raw_arguments=raw))


BAD_JSON = '{"customer": "Ada" "items": []}'
CUT_SHORT = '{"customer": "Ada", "items": [{"name": "a", "pri'


async def test_malformed_and_cut_short_answers_are_sent_back_then_accepted() -> None:
    model = ScriptedModel(
        [malformed(BAD_JSON, "f1"), malformed(CUT_SHORT, "f2"), answer(GOOD, "f3")]
    )
    result, recorder = await run(model, Order)
    assert result.reason == "stop"
    assert result.output == VALUE
    # Each malformed call is answered with the JSON problem, and the model asked again.
    first = results_of(model.requests[1].messages)["f1"]
    assert first.is_error
    assert "$: malformed argument JSON (Expecting ',' delimiter" in text_of(first)
    assert "Call final_result again" in text_of(first)
    second = results_of(model.requests[2].messages)["f2"]
    assert "$: malformed argument JSON (Unterminated string" in text_of(second)
    outcomes = [e.outcome for e in recorder.of(ev.ToolExecutionEnd)]
    assert outcomes == ["invalid_arguments", "invalid_arguments", "ok"]
    # The raw text stays in the transcript; nothing is invented in its place.
    kept = result.messages[1].tool_calls[0]
    assert (kept.raw_arguments, dict(kept.arguments)) == (BAD_JSON, {})


async def test_arguments_that_are_not_an_object_are_sent_back() -> None:
    model = ScriptedModel([malformed('["Ada"]'), answer(GOOD, "f2")])
    result, _ = await run(model, Order)
    assert result.output == VALUE
    sent_back = results_of(model.requests[1].messages)["f1"]
    assert "$: arguments that are not a JSON object: '[\"Ada\"]'" in text_of(sent_back)


async def test_malformed_answers_beyond_the_retries_end_output_invalid() -> None:
    model = ScriptedModel([malformed(BAD_JSON, f"f{i}") for i in range(2)])
    result, _ = await run(model, StructuredOutput(Order, retries=1))
    assert result.reason == "output_invalid"
    assert model.request_count == 2
    assert result.error_message is not None
    assert result.error_message.startswith(
        "the output was still invalid after 1 retry: $: malformed argument JSON (Expecting"
    )
    last = result.messages[-1]
    assert isinstance(last, ToolResultMessage)
    assert last.tool_call_id == "f1"
    assert "no retries left" in text_of(last)
    assert "malformed argument JSON" in text_of(last)
    with pytest.raises(OutputError, match="malformed argument JSON"):
        _ = result.output


async def test_an_ordinary_call_kept_with_malformed_arguments_never_runs() -> None:
    ran: list[Any] = []

    async def execute(*args: Any) -> str:
        ran.append(args)
        return "ran"

    probe = make_tool("probe", execute=execute)
    model = ScriptedModel([malformed("{oops", "p1", "probe"), reply("done")])
    recorder = Recorder()
    with trio.fail_after(5):
        result = await run_agent_loop("x", ctx(probe), model, on_event=recorder)
    assert_consistent(result, recorder.events, model.requests)
    assert ran == []
    sent_back = results_of(model.requests[1].messages)["p1"]
    assert sent_back.is_error
    assert "malformed argument JSON" in text_of(sent_back)
    assert [e.outcome for e in recorder.of(ev.ToolExecutionEnd)] == ["invalid_arguments"]


def test_raw_arguments_round_trip_and_are_left_out_when_unset() -> None:
    kept = malformed(CUT_SHORT)
    data = to_jsonable(kept, Message)
    assert data["content"][0]["raw_arguments"] == CUT_SHORT
    assert from_jsonable(json.loads(json.dumps(data)), Message) == kept
    assert "raw_arguments" not in json.dumps(to_jsonable(answer(GOOD), Message))


async def _forever(*_: Any) -> str:
    await trio.sleep_forever()
    raise AssertionError


# --- the Agent ------------------------------------------------------------------------


async def test_agent_keeps_output_type_per_prompt_and_continue_keeps_the_last() -> None:
    model = ScriptedModel([answer(GOOD, "f1"), reply("plain"), reply("still plain")])
    async with open_agent(model=model) as agent:
        first = await agent.prompt("extract", output_type=Order)
        assert first.output == VALUE
        second = await agent.prompt("chat")
        assert second.output is None
        assert model.requests[1].output is None
        agent.steer("again")
        # continue_() asks for what the last prompt asked for: nothing.
        third = await agent.continue_()
        assert third.output is None
    assert isinstance(first.messages[-1], ToolResultMessage)
    assert model.requests[2].output is None


async def test_agent_continue_asks_again_for_the_last_output_type() -> None:
    model = ScriptedModel([answer({"items": []}, "f1"), answer(GOOD, "f2")])
    async with open_agent(model=model) as agent:
        first = await agent.prompt("extract", output_type=StructuredOutput(Order, retries=0))
        assert first.reason == "output_invalid"
        agent.steer("try again")
        second = await agent.continue_()
    assert second.output == VALUE
    assert model.requests[1].output is not None


@attrs.frozen
class Address:
    street: str
    zip: str


@attrs.frozen
class Customer:
    who: str
    billing: Address | None = None
    shipping: list[Address | None] = attrs.Factory(list)
    contact: Address | Item | None = None


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        # A problem inside an optional class is named at its own path, not at the
        # union's ("... is not valid under any of the schemas listed in 'anyOf'").
        ({"who": "Ada", "billing": {"street": "x", "zip": 1}}, "billing.zip: expected a string"),
        ({"who": "Ada", "billing": {"zip": "1"}}, "billing.street: required field missing"),
        (
            {"who": "Ada", "shipping": [None, {"street": 2, "zip": "1"}]},
            "shipping[1].street: expected a string",
        ),
        ({"who": "Ada", "billing": "here"}, "billing: expected a JSON object or null"),
        # In a tagged union beside None, the class the tag names is the one meant.
        (
            {"who": "Ada", "contact": {"type": "Item", "name": "a", "price": "x"}},
            "contact.price: expected a number",
        ),
    ],
)
async def test_a_problem_inside_an_optional_class_is_named_at_its_path(
    bad: dict[str, Any], said: str
) -> None:
    good = {"who": "Ada", "billing": {"street": "x", "zip": "1"}}
    model = ScriptedModel([answer(bad), answer(good, "f2")])
    result, _ = await run(model, Customer)
    assert result.output == Customer("Ada", Address("x", "1"))
    sent_back = text_of(results_of(model.requests[1].messages)["f1"])
    assert f"  - {said}\n" in sent_back, sent_back


async def test_a_tagged_union_beside_none_is_structured_and_unstructured_with_its_tag() -> None:
    value = Customer("Ada", contact=Item("a", 1.5))
    data = output_converter.unstructure(value, Customer)
    assert data["contact"] == {"type": "Item", "name": "a", "price": 1.5}
    model = ScriptedModel([answer(data), answer({"who": "Bo", "contact": None}, "f2")])
    result, _ = await run(model, Customer)
    assert result.output == value
    result, _ = await run(ScriptedModel([answer({"who": "Bo", "contact": None})]), Customer)
    assert result.output == Customer("Bo")


# --- output_retries= ----------------------------------------------------------------------

MISSING = {"items": []}


def refusals(n: int) -> ScriptedModel:
    """A model that gives ``n`` invalid answers (then nothing)."""
    return ScriptedModel([answer(MISSING, f"f{i}") for i in range(n)])


@pytest.mark.parametrize(
    ("output_type", "output_retries", "answers"),
    [
        (Order, None, 3),  # the default: 2 retries
        (Order, 0, 1),
        (Order, 4, 5),
        (StructuredOutput(Order, mode="tool"), 1, 2),  # the spec gives none: the keyword's
        (StructuredOutput(Order, retries=1), None, 2),
        (StructuredOutput(Order, retries=1), 1, 2),  # both, the same: fine
    ],
)
async def test_output_retries_counts_the_answers_sent_back(
    output_type: Any, output_retries: int | None, answers: int
) -> None:
    model = refusals(answers + 1)
    result, _ = await run(model, output_type, output_retries=output_retries)
    assert result.reason == "output_invalid"
    assert model.request_count == answers
    retries = answers - 1
    assert result.error_message.startswith(f"the output was still invalid after {retries} retr")


async def test_open_agent_loop_takes_output_retries() -> None:
    model = refusals(2)
    async with open_agent_loop("x", ctx(), model, output_type=Order, output_retries=1) as handle:
        async for _ in handle.events:
            pass
    assert handle.result is not None
    assert handle.result.reason == "output_invalid"
    assert model.request_count == 2


@pytest.mark.parametrize(
    ("output_type", "output_retries", "error", "match"),
    [
        (StructuredOutput(Order, retries=1), 3, AgentUsageError, r"output_retries=3 contradicts"),
        (None, 1, AgentUsageError, "output_retries= needs output_type="),
        (Order, -1, ValueError, "output_retries must be an int >= 0"),
        (Order, True, ValueError, "output_retries must be an int >= 0"),
    ],
)
async def test_bad_output_retries_are_refused_before_anything_runs(
    output_type: Any, output_retries: Any, error: type[Exception], match: str
) -> None:
    model = ScriptedModel([answer(GOOD)])
    with pytest.raises(error, match=match):
        await run_agent_loop(
            "x", ctx(), model, output_type=output_type, output_retries=output_retries
        )
    with pytest.raises(error, match=match):
        open_agent_loop("x", ctx(), model, output_type=output_type, output_retries=output_retries)
    async with open_agent(model=model) as agent:
        with pytest.raises(error, match=match):
            await agent.prompt("x", output_type=output_type, output_retries=output_retries)
        assert agent.state.messages == ()
    assert model.request_count == 0


async def test_the_agent_default_applies_where_a_prompt_gives_no_retries() -> None:
    model = refusals(1 + 2 + 3 + 3)
    async with open_agent(model=model, output_retries=0) as agent:
        first = await agent.prompt("x", output_type=Order)
        assert (first.reason, model.request_count) == ("output_invalid", 1)
        # The prompt's keyword, or the spec's own retries, win over the agent's.
        second = await agent.prompt("x", output_type=Order, output_retries=1)
        assert (second.reason, model.request_count) == ("output_invalid", 3)
        third = await agent.prompt("x", output_type=StructuredOutput(Order, retries=2))
        assert (third.reason, model.request_count) == ("output_invalid", 6)
        # continue_() asks again with the last prompt's retries, not the agent's.
        agent.steer("again")
        fourth = await agent.continue_()
        assert (fourth.reason, model.request_count) == ("output_invalid", 9)
    with pytest.raises(ValueError, match=r"Agent\.output_retries must be an int >= 0"):
        agent.output_retries = -1


# --- OutputUpdate ------------------------------------------------------------------------


async def test_output_updates_fill_in_as_the_text_answer_streams() -> None:
    text = json.dumps(GOOD)
    model = ScriptedModel([reply(text)], chunk_size=6)
    result, recorder = await run(model, StructuredOutput(Order, mode="prompted"))
    assert result.output == VALUE
    updates = recorder.of(ev.OutputUpdate)
    partials = [u.partial for u in updates]
    assert len(partials) > 3
    assert partials[-1] == GOOD
    assert partials[0] == {"customer": "A"} or "customer" not in partials[0]
    # Each one follows the MessageUpdate of the piece that made it, and says something new.
    for i, e in enumerate(recorder.events):
        if isinstance(e, ev.OutputUpdate):
            assert isinstance(recorder.events[i - 1], ev.MessageUpdate)
    assert all(a != b for a, b in itertools.pairwise(partials))


async def test_output_updates_follow_the_final_call_arguments() -> None:
    from trio_agent import Done, Start, ToolCall, ToolCallDelta, ToolCallEnd, ToolCallStart

    args = json.dumps(GOOD)
    final_call = ToolCall(id="f1", name="final_result", arguments=GOOD)
    other = ToolCall(id="l1", name="lookup", arguments={"q": "zzz"})
    events: list[Any] = [
        Start(),
        ToolCallStart(index=0, id="l1", name="lookup"),
        ToolCallDelta(index=0, delta='{"q": "zzz"}'),
        ToolCallEnd(index=0, tool_call=other),
        ToolCallStart(index=1, id="f1", name="final_result"),
        *(ToolCallDelta(index=1, delta=args[i : i + 9]) for i in range(0, len(args), 9)),
        ToolCallEnd(index=1, tool_call=final_call),
        Done(message=tool_use(other, final_call)),
    ]
    model = ScriptedModel([events])
    result, recorder = await run(model, Order, make_tool("lookup"))
    assert result.output == VALUE
    partials = [u.partial for u in recorder.of(ev.OutputUpdate)]
    assert partials[-1] == GOOD
    assert {"customer": "Ada"} in partials
    assert all("q" not in p for p in partials)  # the other call's arguments are not the answer


async def test_no_output_updates_without_output_type() -> None:
    model = ScriptedModel([reply(json.dumps(GOOD))], chunk_size=4)
    _, recorder = await run(model, None)
    assert recorder.of(ev.OutputUpdate) == []


# --- values JSON carries as strings ----------------------------------------------------


@attrs.frozen
class Booking:
    ref: uuid.UUID
    when: datetime.datetime
    length: datetime.timedelta
    price: decimal.Decimal
    ticket: bytes
    folder: pathlib.Path
    seats: frozenset[int]
    pair: tuple[int, str]
    until: datetime.date | None = None


BOOKING = Booking(
    ref=uuid.UUID("12345678-1234-5678-1234-567812345678"),
    when=datetime.datetime(2026, 5, 1, 8, 30, tzinfo=datetime.UTC),
    length=datetime.timedelta(hours=2, seconds=0.25),
    price=decimal.Decimal("19.90"),
    ticket=b"\x00\xffok",
    folder=pathlib.Path("/srv/b"),
    seats=frozenset({3, 4}),
    pair=(1, "a"),
    until=datetime.date(2026, 5, 2),
)
BOOKING_JSON = {
    "ref": "12345678-1234-5678-1234-567812345678",
    "when": "2026-05-01T08:30:00Z",
    "length": "PT2H0.25S",
    "price": "19.90",
    "ticket": "AP9vaw==",
    "folder": "/srv/b",
    "seats": [4, 3],
    "pair": [1, "a"],
    "until": "2026-05-02",
}


@pytest.mark.parametrize("mode", ["tool", "prompted", "native"])
async def test_string_valued_fields_round_trip_in_every_mode(mode: Any) -> None:
    wrong = {**BOOKING_JSON, "when": "yesterday", "ref": "nope", "ticket": "!", "length": "P1M"}
    if mode == "tool":
        script = [answer(wrong, "f1"), answer(BOOKING_JSON, "f2")]
    else:
        script = [text_answer(wrong), text_answer(BOOKING_JSON)]
    model = ScriptedModel(script)
    result, _ = await run(model, StructuredOutput(Booking, mode=mode))
    assert result.reason == "stop"
    assert result.output == BOOKING
    sent_back = text_of(model.requests[1].messages[-1])
    for line in (
        "when: expected a date-time (ISO 8601)",
        "ref: expected a UUID",
        "ticket: expected base64 data",
        "length: expected a duration (ISO 8601, like P1DT2H30M)",
    ):
        assert f"  - {line}\n" in sent_back
    if mode == "native":
        asked = model.requests[0].output
        assert asked is not None
        assert asked.strict_schema is not None
        assert asked.strict_schema["properties"]["when"] == {
            "type": "string",
            "format": "date-time",
        }


async def test_a_bad_decimal_is_sent_back_with_its_path() -> None:
    model = ScriptedModel(
        [answer({**BOOKING_JSON, "price": "19,90"}, "f1"), answer(BOOKING_JSON, "f2")]
    )
    result, _ = await run(model, Booking)
    assert result.output == BOOKING
    sent_back = text_of(model.requests[1].messages[-1])
    assert '  - price: expected a decimal number in a string (like "-12.50")\n' in sent_back
