"""``trio-agent chat`` driven by the tests: a session in process whose input is a list
of lines, and the command as a subprocess (on Anthropic, pressing Ctrl-C mid-reply)."""

from __future__ import annotations

import io
import math
import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

import trio

from tests.kit.providers import KEY, make_model
from trio_agent import JsonlTranscript
from trio_agent.cli.chat import run_chat
from trio_agent.replay import RecordingModel
from trio_agent.tools import workspace

if TYPE_CHECKING:
    from pathlib import Path

    from tests.kit.http_server import Server, Stall


async def session(
    server: Server,
    tmp_path: Path,
    kind: str,
    lines: list[str],
    *,
    tools: bool = False,
    record: Path | None = None,
) -> tuple[int, str, Path]:
    """Run a chat whose input is ``lines`` (then end of input); with ``record``, through
    a ``RecordingModel`` writing that cassette."""
    send, receive = trio.open_memory_channel[str](math.inf)
    for line in lines:
        send.send_nowait(line + "\n")
    send.close()
    out = io.StringIO()
    path = tmp_path / "chat.jsonl"
    async with make_model(kind, server.url) as model, JsonlTranscript(path) as sink:
        with trio.fail_after(10):
            code = await run_chat(
                model if record is None else RecordingModel(model, record),
                lines=receive,
                out=out,
                sink=sink,
                tools=workspace(tmp_path, allow_bash=False) if tools else (),
                system_prompt="Be brief.",
            )
    return code, out.getvalue(), path


def chat_command(*args: str) -> list[str]:
    """``trio-agent chat`` with ``args``, as a command for a subprocess."""
    return [sys.executable, "-m", "trio_agent.cli", "chat", *args]


async def open_anthropic_chat(server: Server, *args: str) -> trio.Process:
    """``trio-agent chat`` on Anthropic at ``server``, no tools, stdin and stdout piped."""
    return await trio.lowlevel.open_process(
        chat_command(
            "--provider", "anthropic", "--base-url", server.url, "--model", "m", "--no-tools", *args
        ),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "ANTHROPIC_API_KEY": KEY},
    )


async def prompt_then_ctrl_c(process: trio.Process, stall: Stall) -> None:
    """Type a prompt, and press Ctrl-C once its reply has stalled; returns when the
    abort has reached the server."""
    assert process.stdin is not None
    await process.stdin.send_all(b"hello\n")
    await stall.arrived.wait()
    process.send_signal(signal.SIGINT)
    # trio merges a signal that comes before the last one was handled: wait for the
    # abort to reach the server before anything else.
    await stall.left.wait()
