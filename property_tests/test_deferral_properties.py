"""Deferred calls, on generated scripts: any mix of free calls, calls that wait for a
decision (a tool's ``approval="always"``, or ``before_tool_call`` returning ``Defer``),
and decisions (approve, approve with edited arguments, deny, give a result, or an
in-process approver's answer), across any number of resumes — in-process from the
result, or through the JSONL file alone. Every run's invariants hold, no request is made
while a call is unanswered, each call runs at most once (exactly once when approved or
free), and the final transcript, in memory and on disk, is paired."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_agent import (
    AgentRunResult,
    Approve,
    AssistantMessage,
    BeforeToolCallContext,
    Context,
    Defer,
    DeferredCall,
    Deny,
    JsonlTranscript,
    LoopConfig,
    Result,
    Text,
    Tool,
    ToolCall,
    ToolContext,
    ToolResultMessage,
    UserMessage,
    check_transcript,
    load_transcript,
    resume,
    run_agent_loop,
)
from trio_agent.testing import ScriptedModel, assert_run_invariants

if TYPE_CHECKING:
    from collections.abc import Mapping

    from trio_agent import CallDecision

# Real time (the transcript is written from worker threads, which an autojump clock would
# take for idleness); latencies are milliseconds.
with_clock = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None, max_examples=60
)
OBJ: Mapping[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}
DECISIONS = ("approve", "edit", "deny", "result")

# One call: its tool ("free", "gated": approval="always", or "hooked": deferred by
# before_tool_call), how it is decided if it waits, and how long the tool takes.
calls = st.tuples(
    st.sampled_from(["free", "gated", "hooked"]),
    st.sampled_from(DECISIONS),
    st.integers(min_value=0, max_value=3),
)
turns = st.lists(st.lists(calls, min_size=1, max_size=4), min_size=1, max_size=4)


class Ledger:
    def __init__(self) -> None:
        self.ran: list[str] = []

    def tool(self, name: str, **kwargs: Any) -> Tool:
        async def execute(call: ToolCall, args: Mapping[str, Any], _: ToolContext) -> str:
            await trio.sleep((args.get("n", 0) or 0) / 1000)
            self.ran.append(call.id)
            return f"{name} {call.id}"

        return Tool(name=name, description=name, parameters=OBJ, execute=execute, **kwargs)


def decision(kind: str) -> CallDecision:
    return {
        "approve": Approve(),
        "edit": Approve({"n": 0}),
        "deny": Deny("no"),
        "result": Result("given"),
    }[kind]


@with_clock
@given(
    script=turns,
    sources=st.lists(st.sampled_from(["result", "file"]), min_size=8, max_size=8),
    mode=st.sampled_from(["parallel", "sequential"]),
    approver_answers=st.booleans(),
)
async def test_any_mix_of_deferrals_and_decisions_keeps_the_invariants(
    tmp_path_factory: Any,
    script: list[list[tuple[str, str, int]]],
    sources: list[str],
    mode: str,
    approver_answers: bool,
) -> None:
    path = Path(tmp_path_factory.mktemp("deferral")) / "run.jsonl"
    ledger = Ledger()
    tools = (ledger.tool("free"), ledger.tool("gated", approval="always"), ledger.tool("hooked"))
    plan: dict[str, tuple[str, str]] = {}
    replies: list[AssistantMessage] = []
    for t, turn in enumerate(script):
        made = []
        for i, (name, kind, n) in enumerate(turn):
            cid = f"t{t}c{i}"
            plan[cid] = (name, kind)
            made.append(ToolCall(id=cid, name=name, arguments={"n": n}))
        replies.append(AssistantMessage(content=tuple(made), stop_reason="tool_use"))
    replies.append(AssistantMessage(content=(Text(text="done"),), stop_reason="stop"))
    model = ScriptedModel(replies)

    def before(c: BeforeToolCallContext) -> Defer | None:
        return Defer("hooked") if c.tool_call.name == "hooked" else None

    # An in-process approver answers the "result" calls (the others time out: deferred).
    async def approver(waiting: DeferredCall) -> CallDecision | None:
        if approver_answers and plan[waiting.id][1] == "result":
            return Result("approver's")
        await trio.sleep(1)
        return None

    config = LoopConfig(
        tool_execution=mode,  # type: ignore[arg-type]
        before_tool_call=before,
        approver=approver,
        approval_timeout=0.005,
    )
    events: list[Any] = []
    requests_seen = 0

    def check_run(result: AgentRunResult, before_ctx: Context, resumed_from: Any) -> None:
        nonlocal requests_seen
        new_requests = model.requests[requests_seen:]
        requests_seen = len(model.requests)
        assert_run_invariants(
            result,
            events,
            new_requests,
            before_ctx,
            tool_execution=mode,  # type: ignore[arg-type]
            resumed_from=resumed_from,
        )
        events.clear()

    with trio.fail_after(60):
        async with JsonlTranscript(path) as transcript:

            async def sink(event: Any) -> None:
                events.append(event)
                await transcript(event)

            result = await run_agent_loop(
                [UserMessage.text("go", timestamp=1.0)],
                Context(tools=tools),
                model,
                config,
                on_event=sink,
            )
            check_run(result, Context(), None)
            resumes = 0
            while result.reason == "deferred":
                assert result.deferral is not None
                decisions = {d.id: decision(plan[d.id][1]) for d in result.deferred}
                source: Any = result
                if sources[resumes % len(sources)] == "file":
                    source = await trio.to_thread.run_sync(load_transcript, path)
                    assert source.waiting == result.deferral.waiting_ids
                before_ctx = Context(messages=result.transcript)
                deferral = result.deferral
                result = await resume(
                    source,
                    decisions,
                    model=model,
                    tools=tools,
                    config=config,
                    on_event=sink,
                )
                check_run(result, before_ctx, deferral)
                resumes += 1

    assert result.reason == "stop"
    # No request was made while a call was unanswered.
    for request in model.requests:
        check_transcript(request.messages)
    check_transcript(result.transcript)
    on_disk = load_transcript(path)
    assert on_disk.messages == result.transcript
    assert on_disk.waiting == frozenset()
    # Each call ran at most once; exactly once when free or approved.
    assert len(ledger.ran) == len(set(ledger.ran))
    answered_by_approver = approver_answers
    for cid, (name, kind) in plan.items():
        runs = name == "free" or kind in ("approve", "edit")
        assert (cid in ledger.ran) == runs, (cid, name, kind)
        got = next(
            m for m in result.transcript if type(m) is ToolResultMessage and m.tool_call_id == cid
        )
        if name != "free" and kind == "result":
            text = got.content[0].text  # type: ignore[union-attr]
            assert text == ("approver's" if answered_by_approver else "given")
