"""``trio-agent chat --mcp`` / ``--mcp-url``: MCP servers' tools in a chat session."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import trio

from tests.kit.http_server import sse
from tests.kit.mcp import SERVER
from tests.kit.providers import KEY, openai_reply
from trio_agent import ToolResultMessage, check_transcript, load_transcript

if TYPE_CHECKING:
    from pathlib import Path

    from tests.kit.http_server import Server


async def chat(server_url: str, tmp_path: Path, *args: str) -> trio.CompletedProcess[bytes]:
    cli = [sys.executable, "-m", "trio_agent.cli", "chat", "--model", "m"]
    cli += ["--base-url", server_url + "/v1", "--folder", str(tmp_path)]
    cli += ["--transcript", str(tmp_path / "t.jsonl"), *args]
    with trio.fail_after(60):
        return await trio.run_process(
            cli,
            stdin=b"add them\n",
            capture_stdout=True,
            capture_stderr=True,
            env={**os.environ, "OPENAI_API_KEY": KEY},
            check=False,
        )


async def test_chat_gives_the_model_an_mcp_servers_tools(server: Server, tmp_path: Path) -> None:
    server.add(
        sse(openai_reply("Adding.", [("call_1", "calc__add", {"a": 2, "b": 40})])),
        sse(openai_reply("It is 42.", [])),
    )
    done = await chat(server.url, tmp_path, "--mcp", f"calc={sys.executable} {SERVER} stdio")
    stdout = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "It is 42." in stdout
    names = [t["function"]["name"] for t in server.requests[0].json()["tools"]]
    assert names[:7] == ["read", "write", "edit", "ls", "find", "grep", "bash"]
    assert "calc__add" in names
    assert "calc__echo" in names
    messages = load_transcript(tmp_path / "t.jsonl").messages
    check_transcript(messages)
    result = messages[2]
    assert isinstance(result, ToolResultMessage)
    assert result.text == "42"


async def test_chat_reports_an_mcp_server_that_does_not_start(
    server: Server, tmp_path: Path
) -> None:
    nowhere = await chat(server.url, tmp_path, "--mcp-url", "http://127.0.0.1:9/mcp")
    bad_url = await chat(server.url, tmp_path, "--mcp-url", "ftp://x")
    for done in (nowhere, bad_url):
        assert done.returncode == 2
        assert b"Traceback" not in done.stderr
    assert b"MCP server http://127.0.0.1:9/mcp did not start" in nowhere.stderr
    assert b"must start with http:// or https://" in bad_url.stderr
    assert server.requests == []


async def test_a_chatty_server_does_not_flood_the_terminal(server: Server, tmp_path: Path) -> None:
    # The server prints three lines that are not JSON-RPC on its stdout before serving
    # (the SDK's own transport logged a traceback for each on our stderr).
    server.add(
        sse(openai_reply("Adding.", [("call_1", "calc__add", {"a": 2, "b": 40})])),
        sse(openai_reply("It is 42.", [])),
    )
    command = f"calc=env MCP_TEST_BANNER=3 {sys.executable} {SERVER} stdio"
    done = await chat(server.url, tmp_path, "--mcp", command)
    assert done.returncode == 0, done.stderr.decode()
    assert "It is 42." in done.stdout.decode()
    assert b"Traceback" not in done.stderr
    assert b"not JSON-RPC" not in done.stderr  # logged on trio_agent.mcp, silent by default
    assert done.stderr.decode().count("\n") <= 1


async def test_chat_shows_why_an_mcp_server_did_not_start(server: Server, tmp_path: Path) -> None:
    missing = tmp_path / "moved_away.py"
    done = await chat(server.url, tmp_path, "--mcp", f"{sys.executable} {missing}")
    assert done.returncode == 2
    assert b"Traceback" not in done.stderr
    assert b"did not start: MCPError: Connection closed; its stderr ended with:" in done.stderr
    assert f"can't open file {str(missing)!r}".encode() in done.stderr
    assert server.requests == []
