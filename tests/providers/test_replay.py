"""Record a session against each provider's local server, then replay it offline."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pytest
import trio

from tests.kit.chat import open_anthropic_chat, prompt_then_ctrl_c, session
from tests.kit.http_server import STREAMS, Stall, recorded, sse
from tests.kit.providers import (
    KEY,
    TOOLS,
    anthropic_reply,
    collect,
    make_model,
    openai_reply,
    two_round_trips,
)
from trio_agent import (
    AgentEvent,
    AssistantMessage,
    Context,
    Done,
    LoopConfig,
    MessageEnd,
    ModelOptions,
    UserMessage,
    check_transcript,
    run_agent_loop,
)
from trio_agent.cli import main
from trio_agent.replay import (
    RecordingModel,
    ReplayModel,
    load_cassette,
    message_differences,
    replay_session,
    request_digest,
)

if TYPE_CHECKING:
    from pathlib import Path

    from tests.kit.http_server import Server


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_recorded_session_replays_offline_with_the_same_transcript(
    server: Server, tmp_path: Path, kind: str
) -> None:
    two_round_trips(server, kind)
    cassette = tmp_path / "session.jsonl"
    context = Context(system_prompt="You are a test agent.", tools=TOOLS)
    prompt = [UserMessage.text("Read a.txt and b.txt")]
    # A key-like value in the options must not reach the cassette either.
    config = LoopConfig(model_options=ModelOptions(extra={"api_key": KEY}))
    recorded_events: list[AgentEvent] = []
    async with make_model(kind, server.url) as live:
        recorder = RecordingModel(live, cassette)
        with trio.fail_after(10):
            recorded = await run_agent_loop(
                prompt, context, recorder, config, on_event=recorded_events.append
            )
    assert recorded.reason == "stop"
    assert recorded.steps == 3
    served = len(server.requests)
    text = cassette.read_text()
    assert KEY not in text
    assert "authorization" not in text.lower()

    loaded = load_cassette(cassette)
    assert [r.end.kind for r in loaded.records] == ["done", "done", "done"]
    assert [r.digest for r in loaded.records] == [
        request_digest(r.request) for r in recorder.records
    ]
    # The stream as received: the provider's own deltas, with growing offsets.
    first = loaded.records[0]
    assert first.events[0].event.type == "start"
    offsets = [e.at for e in first.events]
    assert offsets == sorted(offsets)

    replayed_events: list[AgentEvent] = []
    model = ReplayModel(cassette)  # strict, on the clock
    with trio.fail_after(10):
        replayed = await run_agent_loop(
            prompt, context, model, config, on_event=replayed_events.append
        )
    assert len(server.requests) == served  # offline: nothing reached the server
    assert model.mismatches == []
    assert replayed.reason == recorded.reason
    assert replayed.steps == recorded.steps
    assert message_differences(recorded.transcript, replayed.transcript) == []
    # The assistant messages are the recorded ones, to the timestamp.
    assert [m for m in replayed.messages if m.role == "assistant"] == [
        m for m in recorded.messages if m.role == "assistant"
    ]
    # The live display saw the same deltas in the same order.
    assert [type(e).__name__ for e in replayed_events] == [
        type(e).__name__ for e in recorded_events
    ]
    ends = [e.message for e in replayed_events if isinstance(e, MessageEnd)]
    assert tuple(ends) == replayed.messages
    check_transcript(replayed.transcript)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_stalled_provider_replays_as_the_same_idle_timeout(
    server: Server, tmp_path: Path, kind: str
) -> None:
    reply = openai_reply if kind == "openai" else anthropic_reply
    server.add(Stall(reply("Hello there, this reply never ends", [])))
    cassette = tmp_path / "stall.jsonl"
    context = Context(system_prompt="", tools=TOOLS)
    prompt = [UserMessage.text("go")]
    config = LoopConfig(stream_idle_timeout=0.3)
    async with make_model(kind, server.url) as live:
        with trio.fail_after(10):
            recorded = await run_agent_loop(prompt, context, RecordingModel(live, cassette), config)
    assert recorded.reason == "error"
    (record,) = load_cassette(cassette).records
    assert record.end.kind == "cancelled"
    assert record.end.at >= 0.3

    start = trio.current_time()
    with trio.fail_after(10):
        replayed = await run_agent_loop(prompt, context, ReplayModel(cassette), config)
    # The replay stalls where the provider did, and the same idle timeout ends it.
    assert trio.current_time() - start >= 0.3
    assert message_differences(recorded.transcript, replayed.transcript) == []
    assert replayed.messages[-1].error_message == recorded.messages[-1].error_message


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_recorded_chat_replays_from_the_command_line(
    server: Server, tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "notes.txt").write_text("the answer is 42\n")
    reply = openai_reply if kind == "openai" else anthropic_reply
    server.add(
        sse(reply("Reading.", [("call_1", "read", {"path": "notes.txt"})])),
        sse(reply("It says 42.", [])),
    )
    cassette = tmp_path / "chat.jsonl"
    # The second line arrives while the first run works: it is steering.
    code, _, _ = await session(
        server,
        folder,
        kind,
        ["what is in notes.txt?", "and be quick"],
        tools=True,
        record=cassette,
    )
    assert code == 0
    assert KEY not in cassette.read_text()
    second = load_cassette(cassette).records[1].request.messages
    assert [m.role for m in second] == ["user", "assistant", "tool_result", "user"]
    capsys.readouterr()
    served = len(server.requests)

    argv = ["replay", str(cassette), "--folder", str(folder)]
    assert await trio.to_thread.run_sync(main, argv) == 0
    out = capsys.readouterr().out
    assert "It says 42." in out
    assert out.rstrip().splitlines()[-1] == f"{cassette}: 2 requests replayed, identical"
    assert len(server.requests) == served

    # The same session on a folder where the file says something else diverges where
    # the tool's result first reaches the model: request 2, the read's result.
    (folder / "notes.txt").write_text("the answer is 43\n")
    assert await trio.to_thread.run_sync(main, argv) == 1
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last.startswith(
        f"{cassette}: diverged: request 2 differs from the cassette: "
        "messages[2].content[0].text: recorded "
    )
    assert "42" in last
    assert "43" in last


def test_replay_command_refuses_what_is_not_a_cassette(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "t.jsonl"
    bad.write_text('{"format":"trio-agent-cassette","version":9}\n')
    assert main(["replay", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "cassette format version 9 is not supported" in err
    assert main(["replay", str(tmp_path / "missing.jsonl")]) == 1
    assert "cannot read" in capsys.readouterr().err
    assert main(["replay", str(bad), "--folder", str(tmp_path / "nowhere")]) == 2


async def test_chat_record_with_ctrl_c_then_replay(server: Server, tmp_path: Path) -> None:
    # The real command line: a first prompt stalls and is aborted with Ctrl-C, a second
    # prompt is answered, stdin ends. The cassette replays offline, the abort included.
    stall = Stall(anthropic_reply("Thinking about it", []))
    server.add(stall, sse(anthropic_reply("Second answer.", [])))
    cassette = tmp_path / "chat.jsonl"
    process = await open_anthropic_chat(
        server, "--transcript", str(tmp_path / "t.jsonl"), "--record", str(cassette)
    )
    assert process.stdin is not None
    with trio.fail_after(30):
        await prompt_then_ctrl_c(process, stall)
        await process.stdin.send_all(b"again\n")
        await process.stdin.aclose()
        code = await process.wait()
    assert code == 0
    text = cassette.read_text()
    assert KEY not in text
    records = load_cassette(cassette).records
    assert [r.end.kind for r in records] == ["cancelled", "done"]

    report = await replay_session(load_cassette(cassette))
    assert report.identical, report.divergence
    aborted = report.transcript[1]
    assert isinstance(aborted, AssistantMessage)
    assert aborted.stop_reason == "aborted"
    assert aborted.error_message == "interrupted by Ctrl-C"
    assert report.transcript[-1].text == "Second answer."  # type: ignore[union-attr]
    argv = ["replay", str(cassette)]
    assert await trio.to_thread.run_sync(main, argv) == 0


async def test_chat_record_needs_an_existing_folder(tmp_path: Path) -> None:
    with trio.fail_after(30):
        done = await trio.run_process(
            [
                *[sys.executable, "-m", "trio_agent.cli", "chat", "--model", "m"],
                *["--record", str(tmp_path / "nope" / "c.jsonl")],
            ],
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 2
    assert b"no such folder for the cassette" in done.stderr
    assert b"Traceback" not in done.stderr


@pytest.mark.parametrize("name", sorted(p.name for p in STREAMS.glob("*.sse")))
async def test_every_recorded_provider_stream_replays_event_for_event(
    server: Server, tmp_path: Path, name: str
) -> None:
    # Text, thinking with signatures, parallel tool calls, usage: each provider stream
    # goes into a cassette and comes back as the very same events, through JSON text.
    server.add(recorded(name, split=17))
    kind = "openai" if name.startswith("openai") else "anthropic"
    cassette = tmp_path / "one.jsonl"
    async with make_model(kind, server.url) as live:
        received = await collect(RecordingModel(live, cassette))  # type: ignore[arg-type]
    (record,) = load_cassette(cassette).records
    assert [e.event for e in record.events] == received
    assert record.end.kind == ("done" if isinstance(received[-1], Done) else "error")
    replayed = await collect(ReplayModel(cassette, match="sequence"))  # type: ignore[arg-type]
    assert replayed == received
