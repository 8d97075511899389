"""``trio-agent chat --context-window N --compact summarize|elide|recent`` against a fake
provider that refuses requests over a byte budget."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import pytest
import trio

from tests.kit.context import BUDGET, Budgeted
from tests.kit.http_server import serve
from tests.kit.providers import KEY
from trio_agent import load_transcript
from trio_agent.cli import main
from trio_agent.context import model_view

if TYPE_CHECKING:
    from pathlib import Path

PASTE = "0123456789" * 3000  # each prompt pastes 30 KB


async def chat(
    url: str, tmp_path: Path, prompts: int, *args: str, stdin: bytes | None = None
) -> tuple[int, str, str]:
    if stdin is None:
        stdin = "".join(f"look at this: {PASTE} ({i})\n" for i in range(prompts)).encode()
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-m", "trio_agent.cli", "chat", "--base-url", url + "/v1",
             "--model", "m", "--no-tools", *args],
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            env={**os.environ, "OPENAI_API_KEY": KEY},
            check=False,
        )  # fmt: skip
    return done.returncode, done.stdout.decode(), done.stderr.decode()


@pytest.mark.parametrize(("compact", "policy"), [("recent", "keep_recent"), ("elide", "+")])
async def test_compact_keeps_every_request_under_the_window(
    tmp_path: Path, compact: str, policy: str
) -> None:
    handler = Budgeted("openai")
    path = tmp_path / "t.jsonl"
    async with serve() as server:
        server.default = handler
        code, out, err = await chat(
            server.url, tmp_path, 8,
            "--context-window", str(BUDGET // 5), "--compact", compact, "--transcript", str(path),
        )  # fmt: skip
    assert code == 0, err
    assert handler.refused == []
    assert len(handler.accepted) == 8
    assert "context compacted" in out
    markers = load_transcript(path).markers_of("compaction")
    assert markers
    assert policy in markers[-1].data["policy"]


async def test_without_compact_the_window_is_refused(tmp_path: Path) -> None:
    handler = Budgeted("openai")
    async with serve() as server:
        server.default = handler
        code, _, err = await chat(server.url, tmp_path, 5)
    assert code == 1
    assert "context overflow: HTTP 400" in err
    assert handler.refused


async def test_compact_summarize_and_resume(tmp_path: Path) -> None:
    handler = Budgeted("openai")
    path = tmp_path / "t.jsonl"
    async with serve() as server:
        server.default = handler
        code, out, err = await chat(
            server.url, tmp_path, 6,
            "--context-window", str(BUDGET // 5), "--compact", "summarize",
            "--transcript", str(path),
        )  # fmt: skip
        assert code == 0, err
        assert handler.refused == []
        assert "context compacted (summarize)" in out
        loaded = load_transcript(path)
        assert loaded.markers_of("compaction")[-1].data["policy"] == "summarize"
        seen = len(server.requests)
        # Resumed, the session goes on from the summary (no new summary request).
        code, out, err = await chat(
            server.url, tmp_path, 1,
            "--context-window", str(BUDGET // 5), "--compact", "summarize",
            "--resume", str(path), stdin=b"and now?\n",
        )  # fmt: skip
        assert code == 0, err
    resumed = server.requests[seen:]
    assert len(resumed) == 1
    body = resumed[0].json()
    texts = [m["content"] if isinstance(m["content"], str) else "" for m in body["messages"]]
    summary = [t for t in texts if t.startswith("[Summary of the earlier conversation]")]
    assert len(summary) == 1
    # The system prompt, the view the model saw last, the new prompt.
    assert len(body["messages"]) == 1 + len(model_view(loaded)) + 1


def test_bad_context_window_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["chat", "--model", "m", "--context-window", "0", "--compact", "recent"])
    assert info.value.code == 2
    assert "--context-window: must be a whole number above 0" in capsys.readouterr().err
