"""``trio-agent chat`` against the local server: prompts, steering, Ctrl-C, the transcript."""

from __future__ import annotations

import io
import math
import os
import signal
from typing import TYPE_CHECKING

import pytest
import trio

from tests.kit.chat import chat_command, open_anthropic_chat, prompt_then_ctrl_c, session
from tests.kit.http_server import Received, Responder, Stall, sse
from tests.kit.providers import KEY, anthropic_reply, make_model, openai_reply
from trio_agent import (
    AgentEvent,
    AssistantMessage,
    JsonlTranscript,
    MessageEnd,
    ToolResultMessage,
    UserMessage,
    check_transcript,
    load_transcript,
)
from trio_agent.cli.chat import run_chat

if TYPE_CHECKING:
    from pathlib import Path

    from tests.kit.http_server import Server


def _user_texts(body: dict[str, object], kind: str) -> list[str]:
    texts = []
    for message in body["messages"]:  # type: ignore[attr-defined]
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
        else:
            texts += [b["text"] for b in content if b.get("type") == "text"]
    return texts


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_prompt_and_workspace_tool_round_trip(
    server: Server, tmp_path: Path, kind: str
) -> None:
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    reply = openai_reply if kind == "openai" else anthropic_reply
    server.add(
        sse(reply("Reading.", [("call_1", "read", {"path": "notes.txt"})])),
        sse(reply("It says 42.", [])),
    )
    code, out, path = await session(
        server, tmp_path, kind, ["", "what is in notes.txt?"], tools=True
    )
    assert code == 0
    assert "It says 42." in out
    assert out.rstrip().splitlines()[-1] == f"transcript: {path}"
    loaded = load_transcript(path)
    check_transcript(loaded.messages)
    assert [m.role for m in loaded.messages] == ["user", "assistant", "tool_result", "assistant"]
    result = loaded.messages[2]
    assert isinstance(result, ToolResultMessage)
    assert "the answer is 42" in result.text
    assert len(server.requests) == 2


async def test_lines_typed_during_a_run_steer_it(server: Server, tmp_path: Path) -> None:
    # All lines are there at once: the later ones arrive while the first one runs.
    server.add(
        sse(anthropic_reply("Reading.", [("toolu_1", "ls", {})])),
        sse(anthropic_reply("Done.", [])),
    )
    _, out, path = await session(
        server, tmp_path, "anthropic", ["look around", "and be quick"], tools=True
    )
    assert "steering" in out
    # Delivered after the tool batch, before the next request.
    assert [m.role for m in load_transcript(path).messages] == [
        "user",
        "assistant",
        "tool_result",
        "user",
        "assistant",
    ]
    assert _user_texts(server.requests[1].json(), "anthropic")[-1] == "and be quick"


async def test_exit_word_ends_the_session(server: Server, tmp_path: Path) -> None:
    server.add(sse(anthropic_reply("Hi.", [])))
    code, _, path = await session(server, tmp_path, "anthropic", ["hello", "/exit", "never sent"])
    assert code == 0
    assert len(server.requests) == 1
    assert len(load_transcript(path).messages) == 2


async def test_text_typed_during_a_run_is_steering(server: Server, tmp_path: Path) -> None:
    first_arrived = trio.Event()
    slow = sse(anthropic_reply("Working on it, this takes a while.", []), split=40, delay=0.02)

    async def first(request: Received, r: Responder) -> None:
        first_arrived.set()
        await slow(request, r)

    server.add(first, sse(anthropic_reply("Skipping tests.", [])))
    send, receive = trio.open_memory_channel[str](math.inf)
    send.send_nowait("fix the bug\n")
    out = io.StringIO()
    path = tmp_path / "chat.jsonl"
    async with make_model("anthropic", server.url) as model, JsonlTranscript(path) as sink:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:

                async def type_later() -> None:
                    await first_arrived.wait()
                    await send.send("skip tests/\n")
                    send.close()

                nursery.start_soon(type_later)
                code = await run_chat(model, lines=receive, out=out, sink=sink)
    assert code == 0
    assert "steering" in out.getvalue()
    assert len(server.requests) == 2
    assert _user_texts(server.requests[1].json(), "anthropic") == ["fix the bug", "skip tests/"]
    roles = [m.role for m in load_transcript(path).messages]
    assert roles == ["user", "assistant", "user", "assistant"]


class CountingSink:
    """A transcript sink that can be waited on: ``await sink.written(n)``."""

    def __init__(self, inner: JsonlTranscript) -> None:
        self.inner = inner
        self.path = inner.path
        self.count = 0
        self._waiters: dict[int, trio.Event] = {}

    async def write_event(self, event: AgentEvent) -> None:
        await self.inner.write_event(event)
        if isinstance(event, MessageEnd):
            self.count += 1
            for n, waiter in self._waiters.items():
                if self.count >= n:
                    waiter.set()

    async def written(self, n: int) -> None:
        if self.count < n:
            await self._waiters.setdefault(n, trio.Event()).wait()


async def test_ctrl_c_aborts_the_run_then_a_second_exits(server: Server, tmp_path: Path) -> None:
    stall = Stall(anthropic_reply("Hello there, a long answer", []))
    arrived, left = stall.arrived, stall.left
    server.add(stall, sse(anthropic_reply("Second answer.", [])))
    lines_send, lines = trio.open_memory_channel[str](math.inf)
    signals_send, signals = trio.open_memory_channel[int](math.inf)
    lines_send.send_nowait("first question\n")
    out = io.StringIO()
    path = tmp_path / "chat.jsonl"
    async with make_model("anthropic", server.url) as model, JsonlTranscript(path) as inner:
        sink = CountingSink(inner)
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:

                async def operator() -> None:
                    await arrived.wait()
                    await signals_send.send(signal.SIGINT)  # aborts the run
                    await left.wait()
                    # A new line resets the count: this run finishes normally.
                    await lines_send.send("second question\n")
                    await sink.written(4)
                    await signals_send.send(signal.SIGINT)
                    await signals_send.send(signal.SIGINT)  # exits

                nursery.start_soon(operator)
                code = await run_chat(
                    model,
                    lines=lines,
                    out=out,
                    sink=sink,
                    signals=signals,  # type: ignore[arg-type]
                )
    assert code == 130
    assert "aborted" in out.getvalue()
    messages = load_transcript(path).messages
    check_transcript(messages)
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    aborted = messages[1]
    assert isinstance(aborted, AssistantMessage)
    assert aborted.stop_reason == "aborted"
    # Whatever had arrived when Ctrl-C came is kept.
    assert "Hello there, a long answer".startswith(aborted.text)
    final = messages[3]
    assert isinstance(final, AssistantMessage)
    assert final.text == "Second answer."
    # The aborted reply is not sent back: the second request has both questions only.
    assert _user_texts(server.requests[1].json(), "anthropic") == [
        "first question",
        "second question",
    ]
    assert isinstance(messages[2], UserMessage)


async def test_second_ctrl_c_during_a_run_keeps_the_transcript_paired(
    server: Server, tmp_path: Path
) -> None:
    stall = Stall(anthropic_reply("Reading.", [("toolu_1", "read", {"path": "x"})]), 2 / 3)
    arrived = stall.arrived
    server.add(stall)
    lines_send, lines = trio.open_memory_channel[str](math.inf)
    signals_send, signals = trio.open_memory_channel[int](math.inf)
    lines_send.send_nowait("go\n")
    path = tmp_path / "chat.jsonl"
    async with make_model("anthropic", server.url) as model, JsonlTranscript(path) as sink:
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:

                async def operator() -> None:
                    await arrived.wait()
                    # Both at once: the run is aborted and the session ends.
                    signals_send.send_nowait(signal.SIGINT)
                    signals_send.send_nowait(signal.SIGINT)

                nursery.start_soon(operator)
                code = await run_chat(
                    model, lines=lines, out=io.StringIO(), sink=sink, signals=signals
                )
    assert code == 130
    messages = load_transcript(path).messages
    check_transcript(messages)
    assert [m.role for m in messages][:2] == ["user", "assistant"]


async def test_command_line_session(server: Server, tmp_path: Path) -> None:
    server.add(sse(openai_reply("Hello from the server.", [])))
    path = tmp_path / "t.jsonl"
    env = {**os.environ, "OPENAI_API_KEY": KEY}
    with trio.fail_after(30):
        done = await trio.run_process(
            chat_command(
                "--base-url",
                server.url + "/v1",
                "--model",
                "m",
                "--folder",
                str(tmp_path),
                "--transcript",
                str(path),
            ),
            stdin=b"hi\n",
            capture_stdout=True,
            capture_stderr=True,
            env=env,
            check=False,
        )
    stdout = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "Hello from the server." in stdout
    assert stdout.rstrip().splitlines()[-1] == f"transcript: {path}"
    assert KEY not in stdout
    body = server.requests[0].json()
    assert [t["function"]["name"] for t in body["tools"]] == [
        "read",
        "write",
        "edit",
        "ls",
        "find",
        "grep",
        "bash",
    ]
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


async def test_command_line_ctrl_c_twice(server: Server, tmp_path: Path) -> None:
    stall = Stall(anthropic_reply("Thinking about it", []))
    server.add(stall)
    path = tmp_path / "t.jsonl"
    process = await open_anthropic_chat(server, "--transcript", str(path))
    assert process.stdin is not None
    assert process.stdout is not None
    with trio.fail_after(30):
        await prompt_then_ctrl_c(process, stall)
        # The second Ctrl-C exits.
        process.send_signal(signal.SIGINT)
        output = b""
        while chunk := await process.stdout.receive_some():
            output += chunk
        code = await process.wait()
    await process.stdin.aclose()
    assert code == 130
    assert output.decode().rstrip().splitlines()[-1] == f"transcript: {path}"
    messages = load_transcript(path).messages
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[1].stop_reason == "aborted"  # type: ignore[union-attr]


async def test_bad_arguments(tmp_path: Path) -> None:
    with trio.fail_after(30):
        missing = await trio.run_process(
            chat_command("--model", "m", "--folder", str(tmp_path / "nope")),
            capture_stderr=True,
            check=False,
        )
        bad_url = await trio.run_process(
            chat_command("--model", "m", "--base-url", "ftp://x", "--folder", str(tmp_path)),
            capture_stderr=True,
            check=False,
        )
    assert missing.returncode == 2
    assert b"no such folder" in missing.stderr
    assert bad_url.returncode == 2
    assert b"base_url must be an http(s) URL" in bad_url.stderr
    assert b"Traceback" not in missing.stderr + bad_url.stderr
