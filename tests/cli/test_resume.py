"""``trio-agent resume TRANSCRIPT``: lists the calls a run left waiting, refuses bad
decisions before anything runs, and resumes the run from the file alone against a real
HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import attrs
import trio

from tests.kit.http_server import sse
from tests.kit.loop import call, tool_use
from tests.kit.providers import openai_reply
from trio_agent import (
    Context,
    JsonlTranscript,
    ToolResultMessage,
    UserMessage,
    check_transcript,
    load_transcript,
    run_agent_loop,
)
from trio_agent.testing import ScriptedModel
from trio_agent.tools import workspace

from .test_chat import WITH_KEY

if TYPE_CHECKING:
    from pathlib import Path

    from tests.kit.http_server import Server


async def resume_cli(*args: str) -> tuple[int, str, str]:
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, "-m", "trio_agent.cli", "resume", *args],
            capture_stdout=True,
            capture_stderr=True,
            env=WITH_KEY,
            check=False,
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def deferred_transcript(tmp_path: Path) -> Path:
    """A run whose two writes wait for approval, written to a transcript file."""
    path = tmp_path / "run.jsonl"
    tools = tuple(
        attrs.evolve(t, approval="always") if t.name == "write" else t
        for t in workspace(tmp_path, allow_bash=False)
    )
    model = ScriptedModel(
        [
            tool_use(
                call("call_1", "write", path="a.txt", content="a\n"),
                call("call_2", "write", path="b.txt", content="b\n"),
            )
        ]
    )
    async with JsonlTranscript(path) as transcript:
        result = await run_agent_loop(
            [UserMessage.text("write two files")],
            Context(tools=tools),
            model,
            on_event=transcript,
        )
    assert result.reason == "deferred"
    return path


def local(server: Server, tmp_path: Path) -> list[str]:
    return ["--model", "m", "--base-url", server.url + "/v1", "--folder", str(tmp_path)]


async def test_without_decisions_it_lists_the_waiting_calls(tmp_path: Path) -> None:
    path = await deferred_transcript(tmp_path)
    code, out, err = await resume_cli(str(path))
    assert code == 0, err
    assert out.splitlines() == [
        "2 calls wait for a decision:",
        '  call_1: write {"content": "a\\n", "path": "a.txt"}',
        '  call_2: write {"content": "b\\n", "path": "b.txt"}',
        f"answer with: trio-agent resume {path} --approve ID --deny ID [--reason TEXT]",
    ]


async def test_bad_decisions_are_refused_and_nothing_changes(
    server: Server, tmp_path: Path
) -> None:
    path = await deferred_transcript(tmp_path)
    before = path.read_bytes()
    for args, says in [
        (["--approve", "call_1"], "no decision for the deferred call(s) 'call_2'"),
        (
            ["--approve", "call_1", "--deny", "call_2", "--deny", "zz"],
            "no deferred call has the id 'zz'",
        ),
        (["--approve", "call_1", "--deny", "call_1"], "approved and denied at once: call_1"),
    ]:  # fmt: skip
        code, out, err = await resume_cli(str(path), *args, *local(server, tmp_path))
        assert code == 2, (args, out, err)
        assert says in err
        assert err.count("\n") == 1  # one line, no traceback
    assert path.read_bytes() == before
    assert server.requests == []
    assert not (tmp_path / "a.txt").exists()
    code, _, err = await resume_cli(str(tmp_path / "missing.jsonl"))
    assert code == 2
    assert "no transcript at" in err
    code, _, err = await resume_cli(str(path), "--approve", "call_1", "--deny", "call_2")
    assert code == 2
    assert "--model is needed" in err


async def test_approve_and_deny_resume_the_run_from_the_file(
    server: Server, tmp_path: Path
) -> None:
    path = await deferred_transcript(tmp_path)
    server.add(sse(openai_reply("Wrote a, not b.", [])))
    code, out, err = await resume_cli(
        str(path),
        "--approve",
        "call_1",
        "--deny",
        "call_2",
        "--reason",
        "b is not needed",
        *local(server, tmp_path),
    )
    assert code == 0, err
    assert (tmp_path / "a.txt").read_text() == "a\n"
    assert not (tmp_path / "b.txt").exists()
    assert out.splitlines()[-1] == f"transcript: {path}"
    assert "Wrote a, not b." in out
    loaded = load_transcript(path)
    check_transcript(loaded.messages)
    assert loaded.waiting == frozenset()
    results = [m for m in loaded.messages if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id for r in results] == ["call_1", "call_2"]
    assert results[1].is_error
    assert results[1].text == "b is not needed"
    # The model's one request came with both results, in declaration order.
    (request,) = server.requests
    sent = json.loads(request.body)["messages"]
    assert [m.get("tool_call_id") for m in sent if m["role"] == "tool"] == ["call_1", "call_2"]
    # Nothing is left to resume.
    code, _, err = await resume_cli(str(path), "--approve", "call_1", *local(server, tmp_path))
    assert code == 2
    assert "nothing to resume" in err


async def test_check_accepts_a_transcript_that_waits(tmp_path: Path) -> None:
    path = await deferred_transcript(tmp_path)
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, "-m", "trio_agent.cli", "check", str(path)],
            capture_stdout=True,
            capture_stderr=True,
            env=WITH_KEY,
            check=False,
        )
    out = done.stdout.decode()
    assert done.returncode == 0, out
    assert "2 call(s) wait for a decision (call_1, call_2)" in out
    assert out.splitlines()[-1] == f"{path}: 2 messages, ok"


async def test_chat_resume_refuses_a_transcript_that_waits(tmp_path: Path) -> None:
    from .test_chat import chat_cli

    path = await deferred_transcript(tmp_path)
    before = path.read_bytes()
    code, _, err = await chat_cli(
        "--resume",
        str(path),
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--folder",
        str(tmp_path),
        env=WITH_KEY,
    )
    assert code == 2
    assert "2 call(s) waiting for a decision (call_1, call_2)" in err
    assert "trio-agent resume" in err
    assert path.read_bytes() == before  # not repaired: the calls still wait
