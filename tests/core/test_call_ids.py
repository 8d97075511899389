"""Tool-call ids: a reused id gets a fresh one, and the id checks stay linear.

Some OpenAI-compatible servers restart their ids at ``call_0`` every turn. The loop gives
an id already used earlier in the transcript a fresh, deterministic one (``call_0~2``)
before the reply enters the transcript, so each call runs once, its result carries the
same fresh id, and ``check_transcript`` accepts the transcript.

The size tests are not timed: they use sizes where the former quadratic checks (16,000
calls: ~12 s; 8,000 calls: ~2-3 s) would take many minutes and hit their timeout, while
the linear ones take well under a second. No duration is asserted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

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
    AssistantMessage,
    Context,
    JsonlTranscript,
    MessageEnd,
    Text,
    ToolCall,
    ToolExecutionStart,
    ToolResultMessage,
    UserMessage,
    check_transcript,
    load_transcript,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent._core._call_ids import CallIds
from trio_agent._core._pairing import transcript_violations
from trio_agent._core._turn import decide
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from trio_agent import ToolContext


# --- ids reused across turns -------------------------------------------------------------


def _counting_tool(ran: list[str]) -> Any:
    async def execute(c: ToolCall, args: Mapping[str, Any], _ctx: ToolContext) -> str:
        ran.append(c.id)
        await trio.lowlevel.checkpoint()
        return f"ran {c.id} with {args.get('n')}"

    return make_tool("probe", execute)


def _ids(messages: Any) -> list[str]:
    out: list[str] = []
    for m in messages:
        if isinstance(m, AssistantMessage):
            out.extend(c.id for c in m.tool_calls)
        elif isinstance(m, ToolResultMessage):
            out.append(f"result {m.tool_call_id}")
    return out


async def test_an_id_reused_in_a_later_turn_gets_a_fresh_one() -> None:
    ran: list[str] = []
    model = ScriptedModel(
        [
            tool_use(call("call_0", n=1), call("call_1", n=2)),
            tool_use(call("call_0", n=3)),  # the server restarted its ids
            tool_use(call("call_0", n=4), call("call_1", n=5)),
            reply("done"),
        ]
    )
    rec = Recorder()
    result = await run_agent_loop(prompt(), ctx(_counting_tool(ran)), model, on_event=rec)
    assert result.reason == "stop"
    assert sorted(ran) == ["call_0", "call_0~2", "call_0~3", "call_1", "call_1~2"]
    assert _ids(result.messages) == [
        "call_0",
        "call_1",
        "result call_0",
        "result call_1",
        "call_0~2",
        "result call_0~2",
        "call_0~3",
        "call_1~2",
        "result call_0~3",
        "result call_1~2",
    ]
    # Each call ran once, with its own arguments; the model saw the fresh ids.
    texts = [m.text for m in result.messages if isinstance(m, ToolResultMessage)]
    assert texts[2:] == ["ran call_0~2 with 3", "ran call_0~3 with 4", "ran call_1~2 with 5"]
    last_request = model.requests[-1]
    assert _ids(last_request.messages) == _ids(result.messages)
    check_transcript(result.transcript)
    assert_consistent(result, rec.events, model.requests)
    # The events name the fresh id too.
    starts = [e.call_id for e in rec.of(ToolExecutionStart)]  # (declaration order)
    assert starts == ["call_0", "call_1", "call_0~2", "call_0~3", "call_1~2"]
    ends = [e.message for e in rec.of(MessageEnd) if isinstance(e.message, AssistantMessage)]
    assert [c.id for c in ends[1].tool_calls] == ["call_0~2"]


async def test_a_fresh_id_never_collides_with_one_in_the_transcript() -> None:
    # "call_0~2" is taken already (by the context), and the reply itself uses "call_0~3".
    earlier = [
        UserMessage.text("before"),
        tool_use(call("call_0"), call("call_0~2")),
        ToolResultMessage(tool_call_id="call_0", tool_name="probe", content=(Text(text="a"),)),
        ToolResultMessage(tool_call_id="call_0~2", tool_name="probe", content=(Text(text="b"),)),
    ]
    ran: list[str] = []
    model = ScriptedModel([tool_use(call("call_0"), call("call_0~3")), reply("done")])
    result = await run_agent_loop(prompt(), ctx(_counting_tool(ran), messages=earlier), model)
    assert sorted(ran) == ["call_0~3", "call_0~4"]  # (they ran concurrently)
    assert _ids(result.messages) == ["call_0~4", "call_0~3", "result call_0~4", "result call_0~3"]
    check_transcript(result.transcript)


async def test_a_reused_id_is_renamed_in_skipped_and_aborted_replies_too() -> None:
    # A reply that ends the run (stop reason error) still enters the transcript with
    # fresh ids, and its skipped results carry them.
    model = ScriptedModel(
        [tool_use(call("call_0")), reply("broken", "error", call("call_0"), call("call_0"))]
    )
    result = await run_agent_loop(prompt(), ctx(make_tool()), model)
    assert result.reason == "error"
    assert _ids(result.messages)[-3:] == ["call_0~2", "call_0~2", "result call_0~2"]
    # Duplicates inside one reply stay duplicates (that reply is still refused): only
    # the id check across turns passes.
    assert transcript_violations(result.transcript) == [
        "messages[3]: duplicate call id 'call_0~2' in one message"
    ]


async def test_a_reused_id_in_a_reply_cut_short_by_an_abort() -> None:
    # The second reply has finished its call (ToolCallEnd) when the run is aborted: the
    # partial reply enters the transcript with the fresh id, and so does its result.
    model = ScriptedModel([tool_use(call("call_0")), tool_use(call("call_0"))])
    pause = model.pause_at(1, 4)  # before Done: Start, ToolCallStart, Delta, End sent
    with trio.fail_after(5):
        async with open_agent_loop(prompt(), ctx(make_tool()), model) as run:
            await abort_when_reached(run, pause, "stop")
    result = run.result
    assert result is not None
    assert result.reason == "aborted"
    assert _ids(result.messages) == ["call_0", "result call_0", "call_0~2", "result call_0~2"]
    check_transcript(result.transcript)


async def test_resumed_transcript_with_reused_ids_loads_and_checks(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    model = ScriptedModel([tool_use(call("call_0")), tool_use(call("call_0")), reply("done")])
    async with JsonlTranscript(path) as sink:
        result = await run_agent_loop(prompt(), ctx(make_tool()), model, on_event=sink)
    loaded = load_transcript(path)
    check_transcript(loaded.messages)
    assert list(loaded.messages) == list(result.messages)
    # A second run over the loaded transcript, whose server starts at call_0 again.
    model2 = ScriptedModel([tool_use(call("call_0")), reply("done")])
    result2 = await run_agent_loop(
        [UserMessage.text("again")],
        Context(messages=loaded.messages, tools=(make_tool(),)),
        model2,
    )
    assert _ids(result2.messages) == ["call_0~3", "result call_0~3"]
    check_transcript(result2.transcript)


# --- the id checks are linear ------------------------------------------------------------


@pytest.mark.timeout(120)
def test_decide_with_many_duplicate_ids() -> None:
    # 100,000 calls over 50,000 ids: the former pairwise count would run for many
    # minutes here.
    n = 100_000
    calls = tuple(ToolCall(id=f"c{i % (n // 2)}", name="t") for i in range(n))
    decision = decide(AssistantMessage(content=calls, stop_reason="tool_use"))
    assert decision.action == "skip"
    assert decision.end == "error"
    assert [c.id for c in decision.calls] == [f"c{i}" for i in range(n // 2)]
    assert decision.skip_why.startswith("the reply declared duplicate tool call ids (c0, c1, c10,")


def test_decide_names_only_the_duplicated_ids() -> None:
    calls = tuple(ToolCall(id=i, name="t") for i in ("b", "a", "c", "b", "a", "b"))
    decision = decide(AssistantMessage(content=calls, stop_reason="tool_use"))
    assert [c.id for c in decision.calls] == ["b", "a", "c"]
    assert decision.skip_why == "the reply declared duplicate tool call ids (a, b)"


def _batch(n: int) -> list[Any]:
    calls = tuple(ToolCall(id=f"c{i}", name="t") for i in range(n))
    results = [
        ToolResultMessage(tool_call_id=f"c{i}", tool_name="t", content=(Text(text="r"),))
        for i in range(n)
    ]
    return [
        UserMessage.text("x"),
        AssistantMessage(content=calls, stop_reason="tool_use"),
        *results,
    ]


@pytest.mark.timeout(120)
def test_check_transcript_of_a_huge_batch() -> None:
    n = 100_000
    messages = _batch(n)
    check_transcript(messages)
    # Two results swapped and one missing: reported as before, still in one pass.
    messages[2], messages[3] = messages[3], messages[2]
    del messages[-1]
    problems = transcript_violations(messages)
    assert len(problems) == 2
    assert problems[0].startswith(f"messages[2..{n}]: results out of declaration order")
    assert problems[1] == f"messages[1]: call 'c{n - 1}' has no result after it"


# --- the rule itself (CallIds, no loop) ------------------------------------------------------


def test_call_ids_takes_every_call_id_of_the_transcript() -> None:
    ids = CallIds(
        [
            UserMessage.text("go"),
            tool_use(call("a"), call("b")),
            ToolResultMessage(tool_call_id="a", tool_name="probe", content=()),
            tool_use(call("c")),
        ]
    )
    assert ids.taken == {"a", "b", "c"}
    assert ids.next_suffix is None  # nothing renamed yet


def test_fresh_renames_a_taken_id_and_takes_the_new_ones() -> None:
    ids = CallIds([tool_use(call("call_0"))])
    reply_ = tool_use(call("call_0", n=1), call("call_1", n=2), text="hi")
    out = ids.fresh(reply_)
    assert [c.id for c in out.tool_calls] == ["call_0~2", "call_1"]
    # Only the id changes: the arguments, the other blocks and the message stay.
    assert [c.arguments for c in out.tool_calls] == [{"n": 1}, {"n": 2}]
    assert out.content[0] == Text(text="hi")
    assert out.stop_reason == reply_.stop_reason
    assert ids.taken == {"call_0", "call_0~2", "call_1"}
    # The next reuse continues from the next suffix.
    assert [c.id for c in ids.fresh(tool_use(call("call_0"))).tool_calls] == ["call_0~3"]
    assert [c.id for c in ids.fresh(tool_use(call("call_1"))).tool_calls] == ["call_1~2"]


def test_fresh_skips_suffixes_taken_in_the_transcript_or_the_reply() -> None:
    ids = CallIds([tool_use(call("x"), call("x~2"))])
    out = ids.fresh(tool_use(call("x"), call("x~3")))
    assert [c.id for c in out.tool_calls] == ["x~4", "x~3"]


def test_fresh_gives_every_use_of_a_taken_id_the_same_new_id() -> None:
    # A reply repeating a taken id: both uses get one new id (decide refuses the reply).
    ids = CallIds([tool_use(call("a"))])
    out = ids.fresh(tool_use(call("a", n=1), call("a", n=2)))
    assert [c.id for c in out.tool_calls] == ["a~2", "a~2"]
    # An id repeated within the reply but not taken is left alone.
    assert [c.id for c in ids.fresh(tool_use(call("b"), call("b"))).tool_calls] == ["b", "b"]


def test_fresh_returns_a_reply_without_taken_ids_or_calls_as_it_is() -> None:
    ids = CallIds([tool_use(call("a"))])
    plain = reply("no calls")
    assert ids.fresh(plain) is plain
    new = tool_use(call("b"))
    assert ids.fresh(new) is new
    assert ids.taken == {"a", "b"}


@given(st.lists(st.lists(st.sampled_from(["c0", "c1", "c0~2", "c1~3"]), max_size=4), max_size=6))
def test_fresh_ids_never_collide_with_earlier_ones(replies: list[list[str]]) -> None:
    # Replies of distinct ids, each renamed in turn: no id is ever given twice.
    ids = CallIds([])
    seen: set[str] = set()
    for names in replies:
        distinct = list(dict.fromkeys(names))
        out = ids.fresh(tool_use(*(call(n) for n in distinct)))
        new = [c.id for c in out.tool_calls]
        assert len(set(new)) == len(distinct)
        assert not seen & set(new)
        # An id is kept when it was free, else it becomes <id>~<n>.
        for old, fresh in zip(distinct, new, strict=True):
            assert fresh == old if old not in seen else fresh.startswith(f"{old}~")
        seen.update(new)
        assert ids.taken == seen
