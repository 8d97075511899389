"""Token capture from a vLLM-compatible server: ids and logprobs in the reply (streamed and
whole), in the transcript on disk, across retries and aborts."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.kit.http_server import Received, Responder, Stall, error
from tests.kit.providers import FAST, KEY, TOOLS, collect, final, request
from tests.kit.vllm import vllm
from trio_agent import (
    AssistantMessage,
    Context,
    JsonlTranscript,
    MessageUpdate,
    Tokens,
    UserMessage,
    check_transcript,
    load_transcript,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent.providers import OpenAIChat
from trio_agent.testing import (
    VLLMReply,
    completion_ids,
    fake_logprobs,
    render_prompt,
    vllm_response,
)

if TYPE_CHECKING:
    from pathlib import Path

    from tests.kit.http_server import Server

CALLS = (("call_1", "read", {"path": "a.txt"}),)


def model(server: Server, **kwargs: Any) -> OpenAIChat:
    kwargs.setdefault("tokens", True)
    return OpenAIChat("policy", base_url=server.url + "/v1", api_key=KEY, http=FAST, **kwargs)


def expected(reply: VLLMReply, body: dict[str, Any]) -> Tokens:
    ids = completion_ids(reply)
    return Tokens(
        prompt_ids=render_prompt(body),
        completion_ids=ids,
        logprobs=fake_logprobs(ids),
        model_version=reply.model,
    )


@pytest.mark.parametrize("stream", [True, False])
async def test_reply_keeps_the_tokens_the_server_sent(server: Server, stream: bool) -> None:
    reply = VLLMReply(text="Reading it now.", calls=CALLS, model="policy-step-7")
    server.add(vllm(reply, split=7))
    async with model(server, stream=stream) as m:
        message = final(await collect(m, request("read a.txt")))
    body = server.requests[0].json()
    assert body["return_token_ids"] is True
    assert body["logprobs"] is True
    assert body["stream"] is stream
    assert ("stream_options" in body) is stream
    assert server.requests[0].headers["accept"] == (
        "text/event-stream" if stream else "application/json"
    )
    assert message.stop_reason == "tool_use"
    assert message.text == "Reading it now."
    assert [c.arguments for c in message.tool_calls] == [{"path": "a.txt"}]
    assert message.tokens == expected(reply, body)
    assert len(message.tokens.completion_ids) > 3  # several chunks' ids, in order


async def test_without_the_option_nothing_is_asked_or_kept(server: Server) -> None:
    server.add(vllm(VLLMReply(text="hi")))
    async with model(server, tokens=False) as m:
        message = final(await collect(m))
    body = server.requests[0].json()
    assert "return_token_ids" not in body
    assert "logprobs" not in body
    assert message.stop_reason == "stop"
    assert message.tokens is None


async def test_a_retried_request_keeps_only_the_answered_attempts_tokens(server: Server) -> None:
    reply = VLLMReply(text="second attempt")
    server.add(error(503, {"error": {"message": "busy"}}), vllm(reply))
    async with model(server) as m:
        message = final(await collect(m))
    assert len(server.requests) == 2
    assert message.tokens == expected(reply, server.requests[1].json())


async def test_a_stream_cut_short_keeps_no_tokens_and_the_next_request_its_own(
    server: Server,
) -> None:
    first = VLLMReply(text="this reply is cut in the middle of its stream")
    second = VLLMReply(text="whole")
    server.add(vllm(first, cut=True), vllm(second))
    async with model(server) as m:
        broken = final(await collect(m))
        whole = final(await collect(m, request("again")))
    assert broken.stop_reason == "error"
    assert broken.tokens is None
    assert whole.tokens == expected(second, server.requests[1].json())


async def test_a_server_without_token_ids_ends_the_reply_with_an_error(server: Server) -> None:
    def strip(frame: dict[str, Any]) -> None:
        frame.pop("prompt_token_ids", None)
        for choice in frame.get("choices", []):
            choice.pop("token_ids", None)

    server.add(vllm(VLLMReply(text="hi"), edit=strip))
    async with model(server) as m:
        message = final(await collect(m))
    assert message.stop_reason == "error"
    assert "return_token_ids" in (message.error_message or "")
    assert message.text == "hi"  # the content is kept
    assert message.tokens is None


@pytest.mark.parametrize("stream", [True, False])
async def test_logprobs_not_one_per_id_end_the_reply_with_an_error(
    server: Server, stream: bool
) -> None:
    def drop_one(frame: dict[str, Any]) -> None:
        for choice in frame.get("choices", []):
            entries = choice.get("logprobs", {}).get("content")
            if entries:
                entries.pop()

    server.add(vllm(VLLMReply(text="hello there"), edit=drop_one))
    async with model(server, stream=stream) as m:
        message = final(await collect(m))
    assert message.stop_reason == "error"
    assert "logprobs" in (message.error_message or "")


async def test_malformed_token_ids_end_the_reply_with_an_error(server: Server) -> None:
    def bad(frame: dict[str, Any]) -> None:
        for choice in frame.get("choices", []):
            if choice.get("token_ids"):
                choice["token_ids"] = ["x"]

    server.add(vllm(VLLMReply(text="hi"), edit=bad))
    async with model(server) as m:
        message = final(await collect(m))
    assert message.stop_reason == "error"
    assert "token_ids" in (message.error_message or "")


@pytest.mark.parametrize("stream", [True, False])
async def test_transcript_on_disk_holds_the_servers_tokens(
    server: Server, tmp_path: Path, stream: bool
) -> None:
    replies = [VLLMReply(text="Let me read.", calls=CALLS), VLLMReply(text="It says hello.")]
    server.add(*(vllm(r) for r in replies))
    path = tmp_path / "run.jsonl"
    context = Context(system_prompt="You are a test agent.", tools=TOOLS)
    async with model(server, stream=stream) as m, JsonlTranscript(path) as transcript:
        with trio.fail_after(10):
            result = await run_agent_loop(
                [UserMessage.text("read a.txt")], context, m, on_event=transcript
            )
    assert result.reason == "stop"
    loaded = load_transcript(path)
    assert loaded.messages == result.transcript
    assistants = [m for m in loaded.messages if isinstance(m, AssistantMessage)]
    bodies = [r.json() for r in server.requests]
    assert [a.tokens for a in assistants] == [
        expected(r, b) for r, b in zip(replies, bodies, strict=True)
    ]
    # The toy template renders history as the model produced it: the second prompt
    # extends the first prompt and its completion.
    first, second = (a.tokens for a in assistants)
    assert first is not None
    assert second is not None
    head = first.prompt_ids + first.completion_ids
    assert second.prompt_ids[: len(head)] == head
    # Packed, not one JSON value per token.
    line = path.read_text().splitlines()[2]
    assert '"pack":"le"' in line
    assert line.count(",") < 40


async def test_an_aborted_reply_keeps_no_tokens_and_the_transcript_stays_paired(
    server: Server, tmp_path: Path
) -> None:
    reply = VLLMReply(text="this reply never ends " * 20)

    async def stalled(received: Received, r: Responder) -> None:
        await Stall(vllm_response(reply, received.json()).decode())(received, r)

    server.add(vllm(VLLMReply(text="Let me read.", calls=CALLS)), stalled)
    path = tmp_path / "run.jsonl"
    context = Context(system_prompt="s", tools=TOOLS)
    async with model(server) as m, JsonlTranscript(path) as transcript:
        with trio.fail_after(10):
            async with open_agent_loop(
                [UserMessage.text("go")], context, m, on_event=transcript
            ) as run:
                async for event in run.events:
                    if isinstance(event, MessageUpdate) and len(server.requests) == 2:
                        run.abort()
    assert run.result is not None
    assert run.result.reason == "aborted"
    loaded = load_transcript(path).messages
    check_transcript(loaded)
    assistants = [m for m in loaded if isinstance(m, AssistantMessage)]
    assert len(assistants) == 2
    assert assistants[0].tokens == expected(
        VLLMReply(text="Let me read.", calls=CALLS), server.requests[0].json()
    )
    assert assistants[1].stop_reason == "aborted"
    assert assistants[1].tokens is None


@pytest.mark.parametrize("stream", [True, False])
def test_fake_server_logprobs_have_the_fields_vllm_sends(stream: bool) -> None:
    # vLLM sends ``top_logprobs`` on every entry; clients built on the openai types
    # (the OpenAI Agents SDK among them) iterate it without a check.
    from openai.types.chat import ChatCompletionTokenLogprob

    reply = VLLMReply(text="Reading it now.", calls=CALLS)
    body = {"messages": [{"role": "user", "content": "go"}], "logprobs": True, "stream": stream}
    raw = vllm_response(reply, body).decode()
    frames = (
        [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]
        if stream
        else [json.loads(raw)]
    )
    entries = [
        entry
        for frame in frames
        for choice in frame["choices"]
        for entry in (choice.get("logprobs") or {}).get("content", ())
    ]
    assert len(entries) == len(completion_ids(reply))
    for entry in entries:
        assert ChatCompletionTokenLogprob.model_validate(entry).top_logprobs == []
