"""``trio-agent chat`` tells the truth: errors on stderr with a non-zero exit, the key
checked before the first prompt, approval before write/edit/bash, an abort shown as one."""

from __future__ import annotations

import io
import math
import os
import re
import signal
import sys
from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.kit.http_server import Stall, error, recorded, sse
from tests.kit.providers import KEY, anthropic_reply, make_model, openai_reply
from trio_agent import (
    AssistantMessage,
    JsonlTranscript,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    check_transcript,
    load_transcript,
    write_transcript,
)
from trio_agent.cli import main
from trio_agent.cli.chat import CONFIRMED_TOOLS, run_chat
from trio_agent.tools import workspace

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from tests.kit.http_server import Server

WITHOUT_KEYS = {
    k: v
    for k, v in os.environ.items()
    if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY")
}
WITH_KEY = {**WITHOUT_KEYS, "OPENAI_API_KEY": KEY}


async def chat_cli(
    *args: str, stdin: bytes = b"hi\n", env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, "-m", "trio_agent.cli", "chat", *args],
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            env=env if env is not None else WITHOUT_KEYS,
            check=False,
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _local(url: str, tmp_path: Path) -> list[str]:
    return ["--base-url", url, "--model", "m", "--folder", str(tmp_path), "--transcript",
            str(tmp_path / "t.jsonl")]  # fmt: skip


async def test_a_closed_port_is_an_error_on_stderr_and_exit_1(tmp_path: Path) -> None:
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port now.
    code, out, err = await chat_cli(*_local(f"http://127.0.0.1:{port}/v1", tmp_path))
    assert code == 1, err
    assert "model error (error)" in err
    assert "127.0.0.1" in err
    assert "model error" not in out
    assert out.rstrip().splitlines()[-1] == f"transcript: {tmp_path / 't.jsonl'}"


async def test_a_401_names_the_variable_and_the_flag(server: Server, tmp_path: Path) -> None:
    server.add(error(401, {"error": {"message": "no key", "type": "auth"}}))
    code, out, err = await chat_cli(*_local(server.url + "/v1", tmp_path))
    assert code == 1, err
    assert "HTTP 401" in err
    assert "set OPENAI_API_KEY or pass --api-key-file FILE" in err
    assert "api_key=" not in err
    assert "HTTP 401" not in out


async def test_a_500_is_an_error_on_stderr_and_exit_1(server: Server, tmp_path: Path) -> None:
    # Retry-After: 0 keeps the retries quick; the server fails each of them.
    failing = error(500, {"error": {"message": "boom"}}, [("retry-after", "0")])
    server.add(failing, failing, failing, failing)
    code, out, err = await chat_cli(
        *_local(server.url + "/v1", tmp_path), env={**WITHOUT_KEYS, "OPENAI_API_KEY": KEY}
    )
    assert code == 1, err
    assert "HTTP 500" in err
    assert "boom" in err
    assert "HTTP 500" not in out
    assert KEY not in out + err


@pytest.mark.parametrize(("provider", "env"), [("openai", "OPENAI_API_KEY"),
                                               ("openai-responses", "OPENAI_API_KEY"),
                                               ("anthropic", "ANTHROPIC_API_KEY"),
                                               ("gemini", "GEMINI_API_KEY")])  # fmt: skip
async def test_a_missing_key_is_found_before_the_first_prompt(
    tmp_path: Path, provider: str, env: str
) -> None:
    code, out, err = await chat_cli(
        "--provider", provider, "--model", "m", "--folder", str(tmp_path), stdin=b""
    )
    assert code == 2
    assert env in err
    assert "--api-key-file" in err
    assert out == ""
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("provider", "stream", "path", "env"),
    [
        ("openai-responses", "responses_text.sse", "/v1/responses", "OPENAI_API_KEY"),
        (
            "gemini",
            "gemini_text.sse",
            "/v1/models/m:streamGenerateContent?alt=sse",
            "GEMINI_API_KEY",
        ),
    ],
)
async def test_the_responses_and_gemini_providers(
    server: Server, tmp_path: Path, provider: str, stream: str, path: str, env: str
) -> None:
    server.add(recorded(stream))
    code, out, err = await chat_cli(
        "--provider", provider, *_local(server.url + "/v1", tmp_path),
        env={**WITHOUT_KEYS, env: KEY},
    )  # fmt: skip
    assert code == 0, err
    assert "The project is called tiny-pi" in out
    [sent] = server.requests
    assert sent.path == path
    assert KEY in sent.headers.get("authorization", "") + sent.headers.get("x-goog-api-key", "")


async def test_the_api_key_file_is_read(server: Server, tmp_path: Path) -> None:
    server.add(sse(openai_reply("Hello.", [])))
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    code, out, err = await chat_cli(
        *_local(server.url + "/v1", tmp_path), "--api-key-file", str(key_file)
    )
    assert code == 0, err
    assert "Hello." in out
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    missing = await chat_cli(*_local(server.url + "/v1", tmp_path), "--api-key-file",
                             str(tmp_path / "nope"))  # fmt: skip
    assert missing[0] == 2
    assert "cannot read the API key file" in missing[2]


@pytest.mark.parametrize(
    ("option", "error"),
    [
        (
            ["--reasoning", "extreme"],
            "argument --reasoning: invalid choice: 'extreme' (choose from 'off', 'minimal', "
            "'low', 'medium', 'high', 'xhigh')",
        ),
        (["--max-tokens", "-5"], "argument --max-tokens: must be a whole number above 0, not '-5'"),
        (["--max-tokens", "0"], "argument --max-tokens: must be a whole number above 0, not '0'"),
        (
            ["--max-tokens", "lots"],
            "argument --max-tokens: must be a whole number above 0, not 'lots'",
        ),
    ],
)
def test_bad_reasoning_and_max_tokens_are_usage_errors(
    option: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["chat", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", *option])
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("usage: trio-agent chat ")
    assert captured.err.rstrip("\n").splitlines()[-1] == f"trio-agent chat: error: {error}"


async def test_reasoning_and_max_tokens_reach_the_request(server: Server, tmp_path: Path) -> None:
    server.add(sse(openai_reply("Hello.", [])))
    code, _, err = await chat_cli(
        *_local(server.url + "/v1", tmp_path),
        "--reasoning", "high", "--max-tokens", "300",
        env=WITH_KEY,
    )  # fmt: skip
    assert code == 0, err
    body = server.requests[0].json()
    assert body["reasoning_effort"] == "high"
    assert 300 in body.values()


# --- one transcript per conversation: --resume continues one ------------------------------


def _roles_and_texts(messages: Sequence[Any]) -> list[tuple[str, str]]:
    return [(m["role"], _text_of(m)) for m in messages]


def _text_of_message(message: Any) -> str:
    return "".join(getattr(b, "text", "") for b in message.content)


def _text_of(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or ())


async def test_an_existing_transcript_is_refused_without_resume(
    server: Server, tmp_path: Path
) -> None:
    server.add(sse(openai_reply("Hello.", [])))
    code, _, err = await chat_cli(*_local(server.url + "/v1", tmp_path), env=WITH_KEY)
    assert code == 0, err
    path = tmp_path / "t.jsonl"
    before = path.read_bytes()
    code, out, err = await chat_cli(*_local(server.url + "/v1", tmp_path), env=WITH_KEY)
    assert code == 2
    assert out == ""
    assert err == (
        f"trio-agent chat: the transcript {path} exists already: continue that "
        f"conversation with --resume {path}, or give --transcript a new path\n"
    )
    assert path.read_bytes() == before  # nothing appended
    assert len(server.requests) == 1  # the second session never started


async def test_resume_continues_the_conversation_in_the_same_file(
    server: Server, tmp_path: Path
) -> None:
    # Both sessions' replies use the call id call_1: the resumed session renames the
    # second, so the file keeps one id per call.
    write = ("call_1", "write", {"path": "a.txt", "content": "a"})
    server.add(sse(openai_reply("Writing.", [write])), sse(openai_reply("Wrote a.", [])))
    code, _, err = await chat_cli(
        *_local(server.url + "/v1", tmp_path), "--yes", stdin=b"write a\n", env=WITH_KEY
    )
    assert code == 0, err
    path = tmp_path / "t.jsonl"
    first = load_transcript(path).messages
    assert [m.role for m in first] == ["user", "assistant", "tool_result", "assistant"]

    again = ("call_1", "write", {"path": "b.txt", "content": "b"})
    server.add(sse(openai_reply("Writing.", [again])), sse(openai_reply("Wrote b.", [])))
    code, out, err = await chat_cli(
        "--base-url", server.url + "/v1", "--model", "m", "--folder", str(tmp_path),
        "--resume", str(path), "--yes", stdin=b"now write b\n", env=WITH_KEY,
    )  # fmt: skip
    assert code == 0, err
    assert err == ""
    assert f"resuming {path}: 4 messages" in out.splitlines()
    assert out.rstrip().splitlines()[-1] == f"transcript: {path}"
    # The model saw the first conversation before the new prompt.
    sent = server.requests[2].json()["messages"]
    assert _roles_and_texts(sent[1:]) == [
        ("user", "write a"),
        ("assistant", "Writing."),
        ("tool", "Created a.txt (1 bytes, 1 line)."),
        ("assistant", "Wrote a."),
        ("user", "now write b"),
    ]
    # One file, both sessions, in order, and it checks clean.
    loaded = load_transcript(path)
    assert loaded.whole
    assert loaded.messages[:4] == first
    assert [_text_of_message(m) for m in loaded.messages[4:]] == [
        "now write b",
        "Writing.",
        "Created b.txt (1 bytes, 1 line).",
        "Wrote b.",
    ]
    check_transcript(loaded.messages)
    ids = [c.id for m in loaded.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert len(ids) == len(set(ids)) == 2
    assert (tmp_path / "b.txt").read_text() == "b"
    checked = await trio.run_process(
        [sys.executable, "-m", "trio_agent.cli", "check", str(path)],
        capture_stdout=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout


async def test_resume_repairs_a_torn_unpaired_transcript_first(
    server: Server, tmp_path: Path
) -> None:
    # A crash mid-batch: the reply's call has no result, and the line being written
    # when the process died is torn.
    path = tmp_path / "t.jsonl"
    call = ToolCall(id="c1", name="ls", arguments={})
    write_transcript(
        path,
        [
            UserMessage.text("list the folder", timestamp=1.0),
            AssistantMessage(content=(call,), stop_reason="tool_use", timestamp=2.0),
        ],
    )
    with path.open("ab") as f:
        f.write(b'{"role": "tool_result", "tool_call_id": "c1", "con')
    server.add(sse(openai_reply("Let us start over.", [])))
    code, out, err = await chat_cli(
        "--base-url", server.url + "/v1", "--model", "m", "--folder", str(tmp_path),
        "--resume", str(path), stdin=b"again\n", env=WITH_KEY,
    )  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    assert f"resuming {path}: 3 messages" in lines
    assert "  (its torn last line (line 4) was dropped)" in lines
    assert "  (1 tool call without a result got an aborted one)" in lines
    loaded = load_transcript(path)
    assert loaded.whole
    check_transcript(loaded.messages)
    assert [m.role for m in loaded.messages] == [
        "user",
        "assistant",
        "tool_result",
        "user",
        "assistant",
    ]
    repaired = loaded.messages[2]
    assert isinstance(repaired, ToolResultMessage)
    assert repaired.is_error
    # The request carried the repaired history.
    sent = server.requests[0].json()["messages"]
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "tool", "user"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--resume", "missing.jsonl"], "--resume: no transcript at missing.jsonl"),
        (
            ["--resume", "a.jsonl", "--transcript", "b.jsonl"],
            "--resume PATH is the transcript the session appends to: leave out "
            "--transcript (or give both the same path)",
        ),
        (
            ["--resume", "not-a-transcript.txt"],
            "--resume: cannot continue not-a-transcript.txt: not-a-transcript.txt:1:",
        ),
        (
            # Two sessions appended to one file (what an earlier version did): the
            # same call id twice is no pairing repair can fix.
            ["--resume", "twice.jsonl"],
            "--resume: cannot continue twice.jsonl: ",
        ),
    ],
)
async def test_bad_resume_is_one_line_and_exit_2(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    (tmp_path / "a.jsonl").write_bytes(b"")
    (tmp_path / "not-a-transcript.txt").write_text("hello\n")
    session = [
        UserMessage.text("go", timestamp=1.0),
        AssistantMessage(
            content=(ToolCall(id="c1", name="ls", arguments={}),),
            stop_reason="tool_use",
            timestamp=2.0,
        ),
        ToolResultMessage(tool_call_id="c1", tool_name="ls", content=(), timestamp=3.0),
    ]
    write_transcript(tmp_path / "twice.jsonl", session * 2)
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, "-m", "trio_agent.cli", "chat", "--base-url",
             "http://127.0.0.1:9/v1", "--model", "m", *extra],
            stdin=b"",
            capture_stdout=True,
            capture_stderr=True,
            cwd=tmp_path,
            check=False,
        )  # fmt: skip
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert err.startswith(f"trio-agent chat: {message}")
    assert err.count("\n") == 1
    if "twice" in message:
        assert err.endswith("'trio-agent check twice.jsonl' lists them\n")
    assert done.stdout == b""


# --- approval ----------------------------------------------------------------------------


class _Watched(io.StringIO):
    """Output that sets ``asked`` once ``pattern`` (the approval question) is written."""

    def __init__(self, pattern: str = "[y/N]") -> None:
        super().__init__()
        self.pattern = pattern
        self.asked = trio.Event()

    def write(self, text: str) -> int:
        if self.pattern in text:
            self.asked.set()
        return super().write(text)


async def approve(server: Server, tmp_path: Path, answer: str | None) -> tuple[str, Path]:
    """A chat asked to write ``out.txt``; ``answer`` is typed at the question (None: the
    input ends there, as with Ctrl-D)."""
    call = ("call_1", "write", {"path": "out.txt", "content": "written\n"})
    server.add(sse(openai_reply("Writing.", [call])), sse(openai_reply("Done.", [])))
    send, lines = trio.open_memory_channel[str](math.inf)
    send.send_nowait("write out.txt\n")
    out = _Watched()
    path = tmp_path / "chat.jsonl"
    async with make_model("openai", server.url) as model, JsonlTranscript(path) as sink:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:

                async def user() -> None:
                    await out.asked.wait()
                    if answer is not None:
                        await send.send(answer + "\n")
                    send.close()

                nursery.start_soon(user)
                code = await run_chat(
                    model,
                    lines=lines,
                    out=out,
                    sink=sink,
                    tools=workspace(tmp_path, allow_bash=False),
                    confirm=CONFIRMED_TOOLS,
                )
    assert code == 0
    return out.getvalue(), path


def _result(path: Path) -> ToolResultMessage:
    results = [m for m in load_transcript(path).messages if isinstance(m, ToolResultMessage)]
    assert len(results) == 1
    return results[0]


def _cost_lines(replies: int) -> list[str]:
    """The line chat shows after a run of ``replies`` scripted OpenAI replies (50 prompt
    and 20 output tokens each, on gpt-4.1): their price, when genai-prices is there."""
    cost = Usage(input_tokens=50 * replies, output_tokens=20 * replies).cost("gpt-4.1", "openai")
    return [f"  cost ${cost:.4f}"] if cost else []


def _timeless(text: str) -> list[str]:
    """``text``'s lines with durations (``6.8 ms``, ``1.02 s``) and the temporary
    folder written as ``T`` and ``TMP``."""
    return re.sub(r"\d+(\.\d+)? m?s\b", "T", text).splitlines()


async def test_a_write_runs_after_the_user_says_yes(server: Server, tmp_path: Path) -> None:
    out, path = await approve(server, tmp_path, "y")
    # Every line once, in order: the call's line, the batch line and the final answer.
    assert _timeless(out) == [
        "tools: read, write, edit, ls, find, grep",
        "type a message and press Enter; typing during a run steers it; Ctrl-C aborts",
        "",
        "you › write out.txt",
        "",
        "assistant › Writing.",
        "  … write out.txt",
        "  allow write out.txt? [y/N]",
        "  ✓ write out.txt — Created out.txt (8 bytes, 1 line). · T",
        "  batch: 1 call · wall T · critical path T · sum of calls T · peak concurrency 1",
        "",
        "assistant › Done.",
        *_cost_lines(2),
        f"transcript: {path}",
    ]
    assert (tmp_path / "out.txt").read_text() == "written\n"
    assert not _result(path).is_error


async def test_a_write_is_blocked_when_the_user_says_no(server: Server, tmp_path: Path) -> None:
    out, path = await approve(server, tmp_path, "n")
    assert not (tmp_path / "out.txt").exists()
    result = _result(path)
    assert result.is_error
    assert "the user declined this call" in result.text
    # The answer was not taken as steering.
    assert "steering" not in out


async def test_the_input_ending_while_a_call_waits_declines_it(
    server: Server, tmp_path: Path
) -> None:
    # Ctrl-D at the question: nothing more will be read, so the call is declined (the
    # model reads why) and the session ends after the run, instead of waiting for ever.
    out, path = await approve(server, tmp_path, None)
    assert _timeless(out)[6:] == [
        "  … write out.txt",
        "  allow write out.txt? [y/N]",
        "  refused (no answer: the input ended): write out.txt",
        "  ✗ write out.txt — blocked: the user left before answering whether to allow it · T",
        "  batch: 0 calls · wall T · critical path T · sum of calls T · peak concurrency 0",
        "",
        "assistant › Done.",
        *_cost_lines(2),
        f"transcript: {path}",
    ]
    assert not (tmp_path / "out.txt").exists()
    result = _result(path)
    assert result.is_error
    assert result.text == "the user left before answering whether to allow it"


async def test_without_a_terminal_and_without_yes_writes_are_refused(
    server: Server, tmp_path: Path
) -> None:
    server.add(
        sse(openai_reply("Writing.", [("call_1", "write", {"path": "x.txt", "content": "x"})])),
        sse(openai_reply("Could not.", [])),
    )
    code, out, err = await chat_cli(
        *_local(server.url + "/v1", tmp_path), env={**WITHOUT_KEYS, "OPENAI_API_KEY": KEY}
    )
    assert code == 0, err
    assert not (tmp_path / "x.txt").exists()
    assert "refused (no terminal to ask, no --yes): write x.txt" in out
    result = _result(tmp_path / "t.jsonl")
    assert result.is_error
    assert "--yes" in result.text


async def test_yes_runs_writes_without_asking(server: Server, tmp_path: Path) -> None:
    server.add(
        sse(openai_reply("Writing.", [("call_1", "write", {"path": "x.txt", "content": "x"})])),
        sse(openai_reply("Done.", [])),
    )
    code, out, err = await chat_cli(
        *_local(server.url + "/v1", tmp_path),
        "--yes",
        env={**WITHOUT_KEYS, "OPENAI_API_KEY": KEY},
    )
    assert code == 0, err
    assert (tmp_path / "x.txt").read_text() == "x"
    assert "[y/N]" not in out


# --- an abort is an abort ----------------------------------------------------------------


async def test_the_users_abort_is_shown_as_an_abort_on_its_own_line(
    server: Server, tmp_path: Path
) -> None:
    stall = Stall(anthropic_reply("Hello there, a long answer", []), fraction=0.8)
    server.add(stall)
    lines_send, lines = trio.open_memory_channel[str](math.inf)
    signals_send, signals = trio.open_memory_channel[int](math.inf)
    lines_send.send_nowait("first question\n")
    out, err = _Watched("Hello"), io.StringIO()
    path = tmp_path / "chat.jsonl"
    async with make_model("anthropic", server.url) as model, JsonlTranscript(path) as sink:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:

                async def operator() -> None:
                    await out.asked.wait()  # the reply is streaming
                    await signals_send.send(signal.SIGINT)  # aborts the run
                    await stall.left.wait()
                    lines_send.close()

                nursery.start_soon(operator)
                code = await run_chat(
                    model,
                    lines=lines,
                    out=out,
                    sink=sink,
                    signals=signals,  # type: ignore[arg-type]
                    errors=err,
                )
    assert code == 0
    text = out.getvalue()
    assert "model error" not in text + err.getvalue()
    assert err.getvalue() == ""
    shown = text.splitlines()
    assert "  (reply aborted)" in shown
    assert "aborted — press Ctrl-C again to exit" in shown
    # The reply's lines hold the reply only (text that streamed in after the Ctrl-C
    # resumes on a line of its own).
    replies = [ln.removeprefix("assistant › ") for ln in shown if ln.startswith("assistant › ")]
    assert replies
    assert "Hello there, a long answer".startswith("".join(replies))


async def test_help_lists_exit_codes_and_defaults(tmp_path: Path) -> None:
    for command in ("chat", "demo", "check", "bench", "replay"):
        with trio.fail_after(30):
            done = await trio.run_process(
                [sys.executable, "-m", "trio_agent.cli", command, "--help"],
                capture_stdout=True,
                check=False,
            )
        text = " ".join(done.stdout.decode().split())
        assert done.returncode == 0
        assert "Exit codes:" in text, command
        assert "Defaults:" in text, command
