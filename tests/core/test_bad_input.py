"""Bad input is stopped where it comes in, and what a run writes always loads again.

At the door: ``prompts`` must be a ``str`` (one user message) or a sequence of messages
whose free-form values a transcript can store, ``Context.tools`` must hold ``Tool``\\s —
anything else is a ``TypeError`` before the run starts; the Agent's queues refuse such a
message the same way. Inside a run: a tool's result content and details, a poll's result,
a model's stop reason and the message a terminal event carries are checked where they
arrive; a wrong one becomes that call's error result, a failed run naming the hook, or an
``error`` reply, and the transcript on disk loads and checks.
"""

from __future__ import annotations

import gc
import math
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.kit.loop import (
    Recorder,
    abort_when_reached,
    assert_consistent,
    call,
    ctx,
    make_tool,
    prompt,
    reply,
    tool_use,
)
from trio_agent import (
    Agent,
    AgentEnd,
    AssistantMessage,
    Context,
    CustomMessage,
    Done,
    Error,
    Image,
    JsonlTranscript,
    LoopConfig,
    Start,
    Text,
    TextDelta,
    TextStart,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolExecutionEnd,
    ToolOutput,
    ToolResultMessage,
    UserMessage,
    check_transcript,
    load_transcript,
    open_agent,
    open_agent_loop,
    repair,
    run_agent_loop,
    tool,
    write_transcript,
)
from trio_agent._core._serde import MAX_VALUE_DEPTH
from trio_agent.cli import main
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
    from pathlib import Path

    from trio_agent import ToolContext


# --- prompts at the door ---------------------------------------------------------------


@asynccontextmanager
async def recorded_transcript(
    path: Path,
) -> AsyncIterator[tuple[Recorder, Callable[[Any], Awaitable[None]]]]:
    """A recorder and a JSONL transcript at ``path``, with the sink that feeds both."""
    rec = Recorder()
    async with JsonlTranscript(path) as sink:

        async def both(event: Any) -> None:
            rec(event)
            await sink(event)

        yield rec, both


def _result_with_details(call_id: str, details: Any) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id, tool_name="probe", content=(Text(text="r"),), details=details
    )


def _circular() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


async def test_a_str_prompt_is_one_user_message() -> None:
    model = ScriptedModel([reply("hello")])
    result = await run_agent_loop("hi", ctx(), model)
    assert result.reason == "stop"
    first = result.messages[0]
    assert isinstance(first, UserMessage)
    assert first.content == (Text(text="hi"),)
    assert len(model.requests[0].messages) == 1


async def test_a_str_prompt_with_open_agent_loop() -> None:
    model = ScriptedModel([reply("hello")])
    async with open_agent_loop("hi", ctx(), model) as run:
        async for _ in run.events:
            pass
    assert run.result is not None
    assert [type(m) for m in run.result.messages] == [UserMessage, AssistantMessage]


def _nested(depth: int) -> list[Any]:
    """A list nesting ``depth`` levels deep."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


BAD_PROMPTS = [
    pytest.param(UserMessage.text("hi"), "not a bare UserMessage: pass [message]", id="bare"),
    pytest.param(b"hi", "not bytes b'hi'", id="bytes"),
    pytest.param({"role": "user"}, "not dict {'role': 'user'}", id="mapping"),
    pytest.param(42, "not int 42", id="int"),
    pytest.param(None, "not NoneType None", id="none"),
    pytest.param(["hi"], "prompts[0] is str 'hi', not a message", id="list-of-str"),
    pytest.param(
        [UserMessage.text("a"), {"text": "b"}],
        "prompts[1] is dict {'text': 'b'}, not a message",
        id="list-holding-a-dict",
    ),
    pytest.param((m for m in ()), "not generator", id="generator"),
    pytest.param(
        [UserMessage.text("a"), CustomMessage(kind="note", details={"when": object()})],
        "prompts[1].details is not JSON data: Object of type object is not JSON serializable",
        id="custom-details-not-json",
    ),
    pytest.param(
        [CustomMessage(kind="note", content=[1j])],
        "prompts[0].content is not JSON data: Object of type complex",
        id="custom-content-complex",
    ),
    pytest.param(
        [UserMessage.text("a"), tool_use(call("c1")), _result_with_details("c1", 1j)],
        "prompts[2].details is not JSON data: Object of type complex",
        id="tool-result-details-bytes",
    ),
    pytest.param(
        [CustomMessage(kind="note", details=_nested(MAX_VALUE_DEPTH + 1))],
        f"prompts[0].details is not JSON data a transcript can hold: arrays and objects "
        f"nested deeper than {MAX_VALUE_DEPTH} levels",
        id="custom-details-nested-deeper-than-a-reader-reads",
    ),
    pytest.param(
        [UserMessage.text("a"), tool_use(call("c0"), call("c1", x=object()), text="t")],
        "prompts[1].content[2].arguments is not JSON data",
        id="tool-call-arguments-not-json",
    ),
]


@pytest.mark.parametrize(("prompts", "says"), BAD_PROMPTS)
async def test_bad_prompts_are_a_type_error_before_anything_runs(prompts: Any, says: str) -> None:
    model = ScriptedModel([reply("never")])
    rec = Recorder()
    with pytest.raises(TypeError, match="prompts") as info:
        await run_agent_loop(prompts, ctx(), model, on_event=rec)
    assert says in str(info.value)
    assert model.requests == []
    assert rec.events == []  # not even AgentStart


@pytest.mark.parametrize(("prompts", "says"), BAD_PROMPTS)
async def test_bad_prompts_fail_open_agent_loop_at_once(prompts: Any, says: str) -> None:
    model = ScriptedModel([reply("never")])
    with pytest.raises(TypeError, match="prompts") as info:
        open_agent_loop(prompts, ctx(), model)
    assert says in str(info.value)
    assert model.requests == []


@pytest.mark.parametrize(
    ("prompt_value", "says"),
    [
        pytest.param(b"hi", "not bytes b'hi'", id="bytes"),
        pytest.param({"role": "user"}, "not dict {'role': 'user'}", id="mapping"),
        pytest.param(42, "not int 42", id="int"),
        pytest.param([UserMessage.text("a"), 7], "got int 7", id="list-holding-an-int"),
        pytest.param(
            [UserMessage.text("a"), CustomMessage(kind="note", details=_circular())],
            "the message.details is not JSON data",
            id="custom-details-circular",
        ),
    ],
)
async def test_agent_prompt_rejects_what_is_not_a_message(prompt_value: Any, says: str) -> None:
    model = ScriptedModel([reply("never")])
    async with open_agent(model) as agent:
        with pytest.raises(TypeError) as info:
            await agent.prompt(prompt_value)
        assert says in str(info.value)
        assert model.requests == []
        assert agent.state.messages == ()
        # The agent is still usable.
        model.add(reply("fine"))
        del model._responses[0]
        result = await agent.prompt("hi")
    assert result.reason == "stop"


async def test_agent_prompt_takes_a_str_a_message_or_several() -> None:
    model = ScriptedModel([reply("1"), reply("2"), reply("3")])
    async with open_agent(model) as agent:
        await agent.prompt("one")
        await agent.prompt(UserMessage.text("two"))
        await agent.prompt(["three", UserMessage.text("four")])
    users = [m for m in agent.state.messages if isinstance(m, UserMessage)]
    assert [m.content[0] for m in users] == [Text(text=t) for t in ("one", "two", "three", "four")]


# --- tools at the door -----------------------------------------------------------------


async def test_agent_queues_refuse_a_message_that_is_not_json() -> None:
    model = ScriptedModel([reply("never")])
    bad = CustomMessage(kind="note", details={"amount": 1.5j})
    async with open_agent(model) as agent:
        with pytest.raises(TypeError, match=r"the message\.details is not JSON data.*complex"):
            agent.steer(bad)
        with pytest.raises(TypeError, match=r"the message\.details is not JSON data"):
            agent.follow_up(bad)
        assert not agent.has_queued_messages
        agent.follow_up(CustomMessage(kind="note", details={"path": "/tmp", "n": [1, 2.5]}))
        assert agent.has_queued_messages


def test_context_tools_must_be_tools() -> None:
    with pytest.raises(TypeError, match=r"Context.tools\[0\] is 'len', not a Tool") as info:
        Context(tools=(len,))
    assert "@trio_agent.tool" in str(info.value)

    async def search(query: str) -> str:
        await trio.lowlevel.checkpoint()
        return query

    with pytest.raises(TypeError, match=r"Context.tools\[1\] is '.*search', not a Tool"):
        Context(tools=[make_tool(), search])
    with pytest.raises(TypeError, match="not one Tool"):
        Context(tools=make_tool())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not str"):
        Context(tools="read")  # type: ignore[arg-type]
    # A decorated function is a Tool; lists are taken as tuples.
    assert Context(tools=[tool(search)]).tools[0].name == "search"


async def test_a_context_that_is_not_a_context_is_a_type_error() -> None:
    model = ScriptedModel([reply("never")])
    with pytest.raises(TypeError, match=r"context must be a trio_agent\.Context, not dict"):
        await run_agent_loop("hi", {"messages": []}, model)  # type: ignore[arg-type]
    assert model.requests == []


BAD_INPUTS = [
    pytest.param(
        "gpt-4",
        None,
        r"model must be a Model \(an object with a stream\(request\) method.*str 'gpt-4'",
        id="model-a-str",
    ),
    pytest.param(object(), None, r"model must be a Model .*not object", id="model-an-object"),
    pytest.param(
        ScriptedModel(),
        {"max_steps": 3},
        r"config must be a trio_agent\.LoopConfig, not dict \{'max_steps': 3\}",
        id="config-a-dict",
    ),
    pytest.param(
        ScriptedModel(), {}, r"config must be a trio_agent\.LoopConfig", id="config-empty"
    ),
]


@pytest.mark.parametrize(("model", "config", "says"), BAD_INPUTS)
async def test_a_model_or_config_of_the_wrong_kind_is_a_type_error_at_once(
    model: Any, config: Any, says: str
) -> None:
    rec = Recorder()
    with pytest.raises(TypeError, match=says):
        await run_agent_loop("hi", ctx(), model, config, on_event=rec)
    assert rec.events == []  # not even AgentStart
    with pytest.raises(TypeError, match=says):
        open_agent_loop("hi", ctx(), model, config)  # when called, not when entered


def test_agent_tools_must_be_tools() -> None:
    with pytest.raises(TypeError, match=r"Agent.tools\[0\] is 'len', not a Tool"):
        Agent(model=ScriptedModel(), tools=(len,))  # type: ignore[arg-type]


async def test_the_agent_refuses_a_model_or_config_of_the_wrong_kind() -> None:
    with pytest.raises(TypeError, match=r"Agent\.model must be a Model .*str 'gpt-4'"):
        Agent(model="gpt-4")  # type: ignore[arg-type]
    model = ScriptedModel([reply("fine")])
    async with open_agent(model) as agent:
        with pytest.raises(TypeError, match=r"Agent\.model must be a Model"):
            agent.model = "gpt-4"  # type: ignore[assignment]
        with pytest.raises(TypeError, match=r"config must be a trio_agent\.LoopConfig"):
            agent.config = {}  # type: ignore[assignment]
        with pytest.raises(TypeError, match=r"replace_messages\(\)'s messages must be a sequence"):
            agent.replace_messages("hello")  # type: ignore[arg-type]
        assert agent.model is model  # neither assignment took
        await agent.prompt("hi")
    assert agent.state.messages[-1].text == "fine"  # type: ignore[union-attr]


# --- tools and config, when they are built ---------------------------------------------


async def _noop(call: ToolCall, args: Mapping[str, Any], _ctx: ToolContext) -> str:
    await trio.lowlevel.checkpoint()
    return "ok"


def _tool(**fields: Any) -> Tool:
    given: dict[str, Any] = {
        "name": "noop",
        "description": "Does nothing.",
        "parameters": {"type": "object", "properties": {}},
        "execute": _noop,
    }
    return Tool(**{**given, **fields})


@pytest.mark.parametrize(
    ("build", "error", "says"),
    [
        pytest.param(
            lambda: _tool(name=""), ValueError, r"Tool\.name must be letters", id="name-empty"
        ),
        pytest.param(
            lambda: _tool(name="read file"),
            ValueError,
            r"Tool\.name must be letters, digits, '_' and '-' only .* not 'read file'",
            id="name-with-a-space",
        ),
        pytest.param(
            lambda: _tool(name="fs.read"), ValueError, "not 'fs.read'", id="name-with-a-dot"
        ),
        pytest.param(
            lambda: _tool(parameters="object"),
            TypeError,
            r"Tool\.parameters must be a JSON Schema object \(a dict\), not str",
            id="parameters-a-str",
        ),
        pytest.param(
            lambda: _tool(execution_mode="one_by_one"),
            ValueError,
            r"Tool\.execution_mode must be one of 'parallel', 'sequential'; not 'one_by_one'",
            id="execution-mode",
        ),
        pytest.param(
            lambda: _tool(timeout=-1),
            ValueError,
            r"Tool\.timeout must be a number of seconds, above zero, or None; not -1",
            id="tool-timeout-negative",
        ),
        pytest.param(lambda: _tool(timeout="5"), ValueError, "not '5'", id="tool-timeout-a-str"),
        pytest.param(
            lambda: Context(tools=(_tool(), _tool(description="Another."))),
            ValueError,
            r"Context\.tools\[1\] is a second tool named 'noop'",
            id="context-two-tools-one-name",
        ),
        pytest.param(
            lambda: Agent(model=ScriptedModel(), tools=[_tool(name="a"), _tool(name="a")]),
            ValueError,
            r"Agent\.tools\[1\] is a second tool named 'a'",
            id="agent-two-tools-one-name",
        ),
        pytest.param(
            lambda: Context(messages="hello"),
            TypeError,
            r"Context\.messages must be a sequence of messages, not str 'hello'",
            id="context-messages-a-str",
        ),
        pytest.param(
            lambda: Context(messages=[UserMessage.text("a"), "b"]),
            TypeError,
            r"Context\.messages\[1\] is str 'b', not a message",
            id="context-messages-holding-a-str",
        ),
        pytest.param(
            lambda: Context(system_prompt=None),
            TypeError,
            r"Context\.system_prompt must be a str, not NoneType None",
            id="context-system-prompt-none",
        ),
        pytest.param(
            lambda: Agent(model=ScriptedModel(), system_prompt=5),
            TypeError,
            r"Agent\.system_prompt must be a str, not int 5",
            id="agent-system-prompt-an-int",
        ),
        pytest.param(
            lambda: Agent(model=ScriptedModel(), steering_mode="some"),
            ValueError,
            r"Agent\.steering_mode must be one of 'one_at_a_time', 'all'; not 'some'",
            id="agent-steering-mode",
        ),
        pytest.param(
            lambda: Agent(model=ScriptedModel(), messages=[1]),
            TypeError,
            r"Agent\.messages\[0\] is int 1, not a message",
            id="agent-messages-holding-an-int",
        ),
        pytest.param(
            lambda: LoopConfig(tool_execution="parallelish"),
            ValueError,
            r"LoopConfig\.tool_execution must be one of 'parallel', 'sequential'",
            id="tool-execution",
        ),
        pytest.param(
            lambda: LoopConfig(tool_timeout=float("nan")),
            ValueError,
            r"LoopConfig\.tool_timeout must be a number of seconds, above zero, or None; not nan",
            id="tool-timeout-nan",
        ),
        pytest.param(
            lambda: LoopConfig(stream_idle_timeout=0),
            ValueError,
            r"LoopConfig\.stream_idle_timeout must be a number of seconds, above zero",
            id="idle-timeout-zero",
        ),
        pytest.param(
            lambda: LoopConfig(cleanup_timeout=-0.5),
            ValueError,
            r"LoopConfig\.cleanup_timeout must be a number of seconds, zero or more; not -0\.5",
            id="cleanup-timeout-negative",
        ),
        pytest.param(
            lambda: LoopConfig(tool_timeout=True),
            ValueError,
            "not True",
            id="tool-timeout-a-bool",
        ),
    ],
)
async def test_a_tool_or_config_that_cannot_work_is_refused_when_built(
    build: Any, error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=says):
        build()


def test_the_bounds_themselves_are_accepted() -> None:
    assert LoopConfig(cleanup_timeout=0).cleanup_timeout == 0
    assert LoopConfig(tool_timeout=0.001, stream_idle_timeout=math.inf).tool_timeout == 0.001
    assert _tool(name="git__status-2", timeout=1, execution_mode="sequential").timeout == 1
    assert len(Context(tools=(_tool(name="a"), _tool(name="b"))).tools) == 2


# --- tool result content ---------------------------------------------------------------


def _returning(output: Any) -> Any:
    async def execute(c: ToolCall, args: Mapping[str, Any], _ctx: ToolContext) -> Any:
        await trio.lowlevel.checkpoint()
        return output

    return execute


BAD_CONTENT = [
    pytest.param(ToolOutput(content=b"raw bytes"), "not bytes", id="bytes"),
    pytest.param(ToolOutput(content={"a": 1}), "not dict", id="dict"),
    pytest.param(ToolOutput(content=["a", "b"]), "content[0] is a str", id="list-of-str"),
    pytest.param(
        ToolOutput(content=[Text(text="ok"), 3]), "content[1] is a int", id="list-holding-int"
    ),
    pytest.param(
        ToolOutput(content=[Text(text=b"x")]),  # type: ignore[arg-type]
        "content[0]: a Text whose fields are not all str",
        id="text-of-bytes",
    ),
    pytest.param(
        ToolOutput(content=[Image(data=b"\x89PNG", mime_type="image/png")]),  # type: ignore[arg-type]
        "content[0]: a Image whose fields are not all str",
        id="image-of-bytes",
    ),
]


async def one_bad_call_beside_a_good_one(
    path: Path, bad: Tool, good: Tool
) -> tuple[ScriptedModel, dict[str, ToolExecutionEnd]]:
    """Run a batch calling ``bad`` (c1) and ``good`` (c2) with a JSONL sink at ``path``:
    c1 ends in an error result, c2 is untouched, and the file holds the whole run."""
    model = ScriptedModel([tool_use(call("c1", bad.name), call("c2", good.name)), reply("noted")])
    async with recorded_transcript(path) as (rec, both):
        result = await run_agent_loop(prompt(), ctx(bad, good), model, on_event=both)
    assert result.reason == "stop"
    ends = {e.call_id: e for e in rec.of(ToolExecutionEnd)}
    assert ends["c1"].outcome == "error"
    assert ends["c1"].is_error
    assert ends["c2"].outcome == "ok"
    assert_consistent(result, rec.events, model.requests)
    loaded = load_transcript(path)
    assert loaded.torn_line is None
    assert list(loaded.messages) == list(result.messages)
    check_transcript(loaded.messages)
    assert main(["check", str(path)]) == 0
    return model, ends


@pytest.mark.parametrize(("output", "says"), BAD_CONTENT)
async def test_bad_result_content_is_that_calls_error(
    output: Any, says: str, tmp_path: Path
) -> None:
    _, ends = await one_bad_call_beside_a_good_one(
        tmp_path / "run.jsonl", make_tool("bad", _returning(output)), make_tool("good")
    )
    text = ends["c1"].result.text
    assert text.startswith("tool result content")
    assert says in text


async def test_a_tool_that_forgot_an_await_is_told_so(recwarn: pytest.WarningsRecorder) -> None:
    async def inner() -> str:
        await trio.lowlevel.checkpoint()
        return "never"

    async def execute(c: ToolCall, args: Mapping[str, Any], _ctx: ToolContext) -> Any:
        await trio.lowlevel.checkpoint()
        return inner()  # the await is missing

    model = ScriptedModel([tool_use(call("c1", "lazy")), reply("ok")])
    rec = Recorder()
    result = await run_agent_loop(prompt(), ctx(make_tool("lazy", execute)), model, on_event=rec)
    (end,) = rec.of(ToolExecutionEnd)
    assert end.outcome == "error"
    assert end.result.text == (
        "a tool must return a str or a ToolOutput, not a coroutine (the tool calls an async "
        "function without await)"
    )
    assert result.reason == "stop"
    gc.collect()
    assert not [w for w in recwarn if "was never awaited" in str(w.message)]


async def test_good_result_content_of_every_shape_is_kept() -> None:
    blocks = [Text(text="a"), Image(data="aGk=", mime_type="image/png")]
    outputs = [
        "plain",
        ToolOutput(content="text"),
        ToolOutput(content=blocks),
        ToolOutput(content=tuple(blocks)),
        ToolOutput(content=[]),
    ]
    tools = [make_tool(f"t{i}", _returning(o)) for i, o in enumerate(outputs)]
    model = ScriptedModel(
        [tool_use(*(call(f"c{i}", f"t{i}") for i in range(len(outputs)))), reply("ok")]
    )
    result = await run_agent_loop(prompt(), ctx(*tools), model)
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [r.is_error for r in results] == [False] * len(outputs)
    assert [r.content for r in results] == [
        (Text(text="plain"),),
        (Text(text="text"),),
        tuple(blocks),
        tuple(blocks),
        (),
    ]


BAD_DETAILS = [
    pytest.param({"when": object()}, "Object of type object is not JSON serializable", id="object"),
    pytest.param([1, 2j], "Object of type complex", id="complex-inside"),
    pytest.param({"amount": {1j}}, "Object of type complex", id="complex-in-a-set"),
    pytest.param(_circular(), "not JSON data", id="circular"),
]


@pytest.mark.parametrize(("details", "says"), BAD_DETAILS)
async def test_details_that_are_not_json_are_that_calls_error(
    details: Any, says: str, tmp_path: Path
) -> None:
    model, ends = await one_bad_call_beside_a_good_one(
        tmp_path / "run.jsonl",
        make_tool("bad", _returning(ToolOutput(content="fine", details=details))),
        make_tool("good", _returning(ToolOutput(content="fine", details={"n": 1}))),
    )
    assert ends["c1"].result.details is None
    text = ends["c1"].result.text
    assert text.startswith("ToolOutput.details is not JSON data: ")
    assert says in text
    assert ends["c2"].result.details == {"n": 1}
    assert "ToolOutput.details is not JSON data" in str(model.requests[1].messages)


async def test_json_details_are_kept_and_load_again(tmp_path: Path) -> None:
    details = {"s": "é", "n": [1, 2.5, -3], "ok": True, "none": None, "deep": {"a": [{}]}}
    path = tmp_path / "run.jsonl"
    model = ScriptedModel([tool_use(call("c1")), reply("ok")])
    tool_ = make_tool("probe", _returning(ToolOutput(content="fine", details=details)))
    async with JsonlTranscript(path) as sink:
        result = await run_agent_loop(prompt(), ctx(tool_), model, on_event=sink)
    (res,) = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert not res.is_error
    assert res.details is details
    assert list(load_transcript(path).messages) == list(result.messages)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        pytest.param(
            {"content": b"oops"},
            "after_tool_call failed: tool result content must be",
            id="content",
        ),
        pytest.param(
            {"details": {"at": object()}},
            "after_tool_call failed: AfterToolCallResult.details is not JSON data: ",
            id="details",
        ),
    ],
)
async def test_a_bad_value_from_after_tool_call_is_that_calls_error(
    change: dict[str, Any], says: str
) -> None:
    from trio_agent import AfterToolCallResult, LoopConfig

    async def after(_ctx: Any) -> AfterToolCallResult:
        await trio.lowlevel.checkpoint()
        return AfterToolCallResult(**change)

    model = ScriptedModel([tool_use(call("c1")), reply("ok")])
    rec = Recorder()
    result = await run_agent_loop(
        prompt(), ctx(make_tool()), model, LoopConfig(after_tool_call=after), on_event=rec
    )
    (end,) = rec.of(ToolExecutionEnd)
    assert end.outcome == "error"
    assert end.result.text.startswith(says)
    assert end.result.details is None
    assert result.reason == "stop"
    check_transcript(result.transcript)


# --- what a hook returns -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hooks", "says"),
    [
        pytest.param(
            {"before_tool_call": lambda _c: "nope"},
            "before_tool_call failed: it returned str 'nope'; expected None or "
            "BeforeToolCallResult",
            id="before-str",
        ),
        pytest.param(
            {"before_tool_call": lambda _c: {"block": True}},
            "before_tool_call failed: it returned dict {'block': True}",
            id="before-dict",
        ),
        pytest.param(
            {"after_tool_call": lambda _c: "done"},
            "after_tool_call failed: it returned str 'done'; expected None or AfterToolCallResult",
            id="after-str",
        ),
    ],
)
async def test_a_call_hook_returning_a_wrong_value_fails_only_that_call(
    hooks: dict[str, Any], says: str
) -> None:
    from trio_agent import LoopConfig

    model = ScriptedModel([tool_use(call("c1"), call("c2", "other")), reply("ok")])
    rec = Recorder()
    seen: list[str] = []

    def only_c1(hook: Any) -> Any:
        def wrapped(c: Any) -> Any:
            seen.append(c.tool_call.id)
            return hook(c) if c.tool_call.id == "c1" else None

        return wrapped

    config = LoopConfig(**{name: only_c1(hook) for name, hook in hooks.items()})
    result = await run_agent_loop(
        prompt(), ctx(make_tool(), make_tool("other")), model, config, on_event=rec
    )
    assert result.reason == "stop"
    assert sorted(seen) == ["c1", "c2"]
    ends = {e.call_id: e for e in rec.of(ToolExecutionEnd)}
    assert ends["c1"].outcome == "error"
    assert ends["c1"].result.text.startswith(says)
    assert ends["c2"].outcome == "ok"
    assert_consistent(result, rec.events, model.requests)


@pytest.mark.parametrize(
    ("hooks", "says", "requests"),
    [
        pytest.param(
            {"transform_context": lambda _m: None},
            "transform_context()'s result must be a sequence of messages, not NoneType None",
            0,
            id="transform-none",
        ),
        pytest.param(
            {"transform_context": lambda _m: [1]},
            "transform_context()'s result[0] is int 1, not a message",
            0,
            id="transform-ints",
        ),
        pytest.param(
            {"convert_to_llm": lambda _m: "hi"},
            "convert_to_llm()'s result must be a sequence of messages, not str 'hi'",
            0,
            id="convert-str",
        ),
        pytest.param(
            {"convert_to_llm": lambda m: [*m, "hi"]},
            "convert_to_llm()'s result[1] is str 'hi', not a message",
            0,
            id="convert-list-holding-str",
        ),
        pytest.param(
            {"prepare_next_turn": lambda _t: "swap"},
            "prepare_next_turn returned str 'swap'; expected None or NextTurn",
            1,
            id="prepare-str",
        ),
    ],
)
async def test_a_run_hook_returning_a_wrong_value_fails_the_run_naming_it(
    hooks: dict[str, Any], says: str, requests: int
) -> None:
    from trio_agent import AgentRunError, LoopConfig

    model = ScriptedModel([tool_use(call("c1")), reply("never")])
    rec = Recorder()
    with pytest.raises(AgentRunError) as info:
        await run_agent_loop(prompt(), ctx(make_tool()), model, LoopConfig(**hooks), on_event=rec)
    assert says in str(info.value)
    assert len(model.requests) == requests  # nothing wrong was sent to the model
    result = info.value.result
    assert result is not None
    assert result.reason == "error"
    check_transcript(result.transcript)
    assert type(rec.events[-1]) is AgentEnd


# --- what a poll returns -------------------------------------------------------------------


async def test_a_poll_returning_a_str_delivers_one_user_message() -> None:
    from trio_agent import LoopConfig

    polls = iter(["steer me", None])
    model = ScriptedModel([reply("first"), reply("second")])
    result = await run_agent_loop(
        prompt(),
        ctx(),
        model,
        LoopConfig(get_steering_messages=lambda: next(polls, [])),
    )
    assert result.reason == "stop"
    assert [type(m) for m in result.messages] == [UserMessage, UserMessage, AssistantMessage]
    assert result.messages[1] == UserMessage(
        content=(Text(text="steer me"),), timestamp=result.messages[1].timestamp
    )


BAD_POLLS = [
    pytest.param(
        ["hi"], "get_follow_up_messages()'s result[0] is str 'hi', not a message", id="list-of-str"
    ),
    pytest.param(
        5,
        "get_follow_up_messages()'s result must be a sequence of messages or a str, not int 5",
        id="int",
    ),
    pytest.param(
        UserMessage.text("hi"),
        "get_follow_up_messages()'s result must be a sequence of messages or a str, not a "
        "bare UserMessage",
        id="bare-message",
    ),
    pytest.param(
        [UserMessage.text("ok"), CustomMessage(kind="note", details=object())],
        "get_follow_up_messages()'s result[1].details is not JSON data",
        id="custom-details-object",
    ),
]


@pytest.mark.parametrize(("polled", "says"), BAD_POLLS)
async def test_a_poll_returning_a_wrong_value_fails_the_run_before_it_enters(
    polled: Any, says: str, tmp_path: Path
) -> None:
    from trio_agent import AgentRunError, LoopConfig

    path = tmp_path / "run.jsonl"
    model = ScriptedModel([tool_use(call("c1")), reply("first"), reply("never")])
    async with recorded_transcript(path) as (rec, both):
        with pytest.raises(AgentRunError) as info:
            await run_agent_loop(
                prompt(),
                ctx(make_tool()),
                model,
                LoopConfig(get_follow_up_messages=lambda: polled),
                on_event=both,
            )
    assert says in str(info.value)
    result = info.value.result
    assert result is not None
    # Nothing the poll returned entered the run: the transcript is the finished turns.
    assert [type(m) for m in result.messages] == [
        UserMessage,
        AssistantMessage,
        ToolResultMessage,
        AssistantMessage,
    ]
    assert len(model.requests) == 2
    check_transcript(result.transcript)
    assert type(rec.events[-1]) is AgentEnd
    assert list(load_transcript(path).messages) == list(result.messages)


# --- what the model sends ----------------------------------------------------------------


async def test_an_unknown_stop_reason_is_an_error_reply(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    filtered = AssistantMessage(
        content=(Text(text="partial answ"), ToolCall(id="c1", name="probe", arguments={})),
        stop_reason="content_filter",  # type: ignore[arg-type]
    )
    model = ScriptedModel([[Start(), Done(message=filtered)]])
    async with recorded_transcript(path) as (rec, both):
        result = await run_agent_loop(prompt(), ctx(make_tool()), model, on_event=both)
    assert result.reason == "error"
    last = result.messages[1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "error"
    assert last.error_message == "the model stopped with an unknown stop reason 'content_filter'"
    assert last.content == filtered.content  # partial content kept
    # Its call got a skipped result; nothing ran.
    assert [type(m) for m in result.messages] == [UserMessage, AssistantMessage, ToolResultMessage]
    assert_consistent(result, rec.events, model.requests)
    loaded = load_transcript(path)
    assert list(loaded.messages) == list(result.messages)
    check_transcript(loaded.messages)
    assert main(["check", str(path)]) == 0


async def test_an_unknown_stop_reason_in_an_error_event_keeps_its_message() -> None:
    odd = AssistantMessage(
        content=(),
        stop_reason="refusal",
        error_message="declined",  # type: ignore[arg-type]
    )
    result = await run_agent_loop(prompt(), ctx(), ScriptedModel([[Error(message=odd)]]))
    last = result.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "error"
    assert last.error_message == (
        "the model stopped with an unknown stop reason 'refusal': declined"
    )


@pytest.mark.parametrize("terminal", [Done, Error])
@pytest.mark.parametrize(
    "carried",
    [
        pytest.param("a string", id="str"),
        pytest.param({"role": "assistant"}, id="dict"),
        pytest.param(UserMessage.text("not a reply"), id="user-message"),
    ],
)
async def test_a_terminal_event_without_an_assistant_message_is_a_malformed_stream(
    terminal: Any, carried: Any, tmp_path: Path
) -> None:
    path = tmp_path / "run.jsonl"
    events = [
        Start(),
        TextStart(index=0),
        TextDelta(index=0, delta="half"),
        terminal(message=carried),
    ]
    with trio.fail_after(5):
        async with recorded_transcript(path) as (rec, both):
            model = ScriptedModel([events])
            result = await run_agent_loop(prompt(), ctx(), model, on_event=both)
    assert result.reason == "error"
    last = result.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "error"
    assert last.error_message == (
        f"malformed model stream: the {terminal.__name__} event carried a "
        f"{type(carried).__name__}, not an AssistantMessage"
    )
    assert last.content == (Text(text="half"),)  # partial content kept
    assert isinstance(rec.events[-1], AgentEnd)
    assert_consistent(result, rec.events, model.requests)
    loaded = load_transcript(path)
    assert list(loaded.messages) == list(result.messages)
    assert main(["check", str(path)]) == 0


# --- a reply cut short names the call it dropped -----------------------------------------


async def test_an_aborted_reply_names_its_unfinished_call() -> None:
    # One call finished, a second still streaming its arguments when the run is aborted.
    events = [
        Start(),
        ToolCallStart(index=0, id="c1", name="probe"),
        ToolCallDelta(index=0, delta="{}"),
        ToolCallEnd(index=0, tool_call=call("c1")),
        ToolCallStart(index=1, id="c2", name="probe"),
        ToolCallDelta(index=1, delta='{"path": "RE'),
        Done(message=tool_use(call("c1"), call("c2"))),
    ]
    model = ScriptedModel([events])
    pause = model.pause_at(0, 6)  # before Done
    rec = Recorder()
    with trio.fail_after(5):
        async with open_agent_loop(prompt(), ctx(make_tool()), model) as run:
            await abort_when_reached(run, pause, "user stop", rec)
    result = run.result
    assert result is not None
    assert result.reason == "aborted"
    reply_message = result.messages[1]
    assert isinstance(reply_message, AssistantMessage)
    assert reply_message.stop_reason == "aborted"
    assert reply_message.error_message == ("user stop; unfinished tool call(s) dropped: probe (c2)")
    assert [c.id for c in reply_message.tool_calls] == ["c1"]  # only the finished call
    skipped = result.messages[2]
    assert isinstance(skipped, ToolResultMessage)
    assert skipped.tool_call_id == "c1"
    assert skipped.is_error
    assert len(result.messages) == 3
    assert_consistent(result, rec.events, model.requests)


async def test_a_stream_that_ends_early_names_its_unfinished_call() -> None:
    events = [
        Start(),
        TextStart(index=0),
        TextDelta(index=0, delta="Reading"),
        ToolCallStart(index=1, id="c9", name="read"),
        ToolCallDelta(index=1, delta='{"pa'),
    ]
    result = await run_agent_loop(prompt(), ctx(make_tool("read")), ScriptedModel([events]))
    assert result.reason == "error"
    last = result.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.content == (Text(text="Reading"),)
    assert last.error_message == (
        "the model stream ended without a Done or Error event; "
        "unfinished tool call(s) dropped: read (c9)"
    )
    assert result.error_message == last.error_message
    check_transcript(result.transcript)


# --- what is written to, or checked as, a transcript ----------------------------------------


async def test_the_writers_refuse_what_is_not_a_message_and_write_nothing(tmp_path: Path) -> None:
    # A line that is not a message would make the whole file unloadable.
    whole = [UserMessage.text("kept")]
    path = tmp_path / "t.jsonl"
    write_transcript(path, whole)
    with pytest.raises(TypeError, match=r"messages\[1\] is str 'hi', not a message"):
        write_transcript(path, [UserMessage.text("a"), "hi"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="messages must be a sequence of messages, not str"):
        write_transcript(path, "hi")  # type: ignore[arg-type]
    assert list(load_transcript(path).messages) == whole  # the file was not replaced
    async with JsonlTranscript(path) as sink:
        with pytest.raises(TypeError, match=r"messages\[0\] is dict"):
            await sink.write_messages([{"role": "user", "content": "hi"}])  # type: ignore[list-item]
        await sink.write_messages([after := UserMessage.text("after")])  # still whole
    assert list(load_transcript(path).messages) == [*whole, after]


def test_the_transcript_checks_refuse_what_is_not_a_message() -> None:
    with pytest.raises(TypeError, match="messages must be a sequence of messages, not str"):
        check_transcript("hi")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"messages\[0\] is str 'hi', not a message"):
        repair(["hi"])  # type: ignore[list-item]


async def test_what_nests_as_deep_as_a_reader_reads_is_written_and_read_back(
    tmp_path: Path,
) -> None:
    # The writers and the readers agree on the limit: at it, a value round-trips.
    note = CustomMessage(kind="note", details=_nested(MAX_VALUE_DEPTH))
    path = tmp_path / "t.jsonl"
    model = ScriptedModel([reply("ok")])
    async with JsonlTranscript(path) as sink:
        await run_agent_loop([UserMessage.text("a"), note], ctx(), model, on_event=sink)
    assert load_transcript(path).messages[1] == note
