"""Helpers for the MCP tests: the test server as a stdio command or an HTTP process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio

# Without the `mcp` extra the MCP tests are skipped, not errors at collection.
pytest.importorskip("mcp")

from tests.kit.loop import tool_use
from tests.kit.processes import alive
from trio_agent import AgentEvent, AssistantMessage, ToolCall
from trio_agent.mcp import StdioServer

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

SERVER = str(Path(__file__).resolve().parent / "programs" / "mcp_server.py")


def stdio_server(log: Path, **kwargs: Any) -> StdioServer:
    """The test server over stdio; its ``slow`` tool logs to ``log``."""
    kwargs.setdefault("stderr", str(log.with_suffix(".stderr")))
    return StdioServer(sys.executable, SERVER, "stdio", env={"MCP_TEST_LOG": str(log)}, **kwargs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server_process(log: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The test server over streamable HTTP on 127.0.0.1; yields (url, process)."""
    port = free_port()
    env = {**os.environ, "MCP_TEST_LOG": str(log)}
    with open(log.with_suffix(".stderr"), "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, SERVER, "http", str(port)], env=env, stdout=err, stderr=err
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the HTTP test server exited with {proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the HTTP test server did not listen within 30 s") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def log_lines(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


async def wait_for_line(log: Path, line: str, seconds: float = 10.0) -> None:
    """Wait (real clock, polling) until ``line`` is in ``log``."""
    with trio.fail_after(seconds):
        await trio.lowlevel.checkpoint()
        while line not in log_lines(log):  # noqa: ASYNC110 - another process writes it
            await trio.sleep(0.02)


async def wait_gone(pid: int, seconds: float) -> None:
    """Wait (real clock, polling) until process ``pid`` is gone."""
    with trio.fail_after(seconds):
        await trio.lowlevel.checkpoint()
        while alive(pid):  # noqa: ASYNC110 - another process's state
            await trio.sleep(0.01)


def calls(*items: tuple[str, str, dict[str, Any]]) -> AssistantMessage:
    """An assistant message calling (id, tool, arguments) for each item."""
    return tool_use(*(ToolCall(id=i, name=n, arguments=a) for i, n, a in items))


def ends(events: Sequence[AgentEvent]) -> dict[str, Any]:
    """call id → its ToolExecutionEnd."""
    from trio_agent import ToolExecutionEnd

    return {e.call_id: e for e in events if isinstance(e, ToolExecutionEnd)}
