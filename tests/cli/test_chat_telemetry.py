"""``trio-agent chat --otel-console``: the spans of a session against the local server."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

import trio

from tests.kit.http_server import sse
from tests.kit.providers import KEY, openai_reply

if TYPE_CHECKING:
    from pathlib import Path

    from tests.kit.http_server import Server


def _spans(text: str) -> list[dict[str, object]]:
    """The JSON objects ConsoleSpanExporter printed, one after another."""
    decoder = json.JSONDecoder()
    spans, i = [], 0
    while (i := text.find("{", i)) != -1:
        span, i = decoder.raw_decode(text, i)
        spans.append(span)
    return spans


async def test_otel_console_prints_the_spans(server: Server, tmp_path: Path) -> None:
    server.add(sse(openai_reply("Hello from the server.", [])))
    env = {**os.environ, "OPENAI_API_KEY": KEY, "OTEL_SERVICE_NAME": "chat-test"}
    env.pop("OTEL_SDK_DISABLED", None)
    command = [sys.executable, "-m", "trio_agent.cli", "chat", "--otel-console"]
    with trio.fail_after(30):
        done = await trio.run_process(
            [
                *command,
                *("--base-url", server.url + "/v1", "--model", "m", "--folder", str(tmp_path)),
                *("--transcript", str(tmp_path / "t.jsonl")),
            ],
            stdin=b"hi\n",
            capture_stdout=True,
            capture_stderr=True,
            env=env,
            check=False,
        )
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert "Hello from the server." in done.stdout.decode()
    assert KEY not in stderr
    spans = {span["name"]: span for span in _spans(stderr)}
    assert set(spans) == {"invoke_agent trio-agent chat", "chat m"}
    chat, run = spans["chat m"], spans["invoke_agent trio-agent chat"]
    assert chat["kind"] == "SpanKind.CLIENT"
    assert chat["parent_id"] == run["context"]["span_id"]  # type: ignore[index]
    attributes = chat["attributes"]
    assert isinstance(attributes, dict)
    assert attributes["server.address"] == "127.0.0.1"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert run["resource"]["attributes"]["service.name"] == "chat-test"  # type: ignore[index]
