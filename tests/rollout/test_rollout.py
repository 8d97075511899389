"""rollout() against the fake vLLM server, and run_rollouts (a fleet in rollout mode)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.kit.providers import FAST, TOOLS
from trio_agent import AssistantMessage, Message, check_transcript, load_transcript
from trio_agent.fleet import FleetTask, TaskSetup
from trio_agent.providers import OpenAIChat
from trio_agent.rollout import Trajectory, rollout, run_rollouts
from trio_agent.testing import VLLMReply, scripted_policy, serve_fake_vllm

if TYPE_CHECKING:
    from pathlib import Path

ROLLOUTS_FILE = "rollouts.jsonl"
REPLIES = (
    VLLMReply(text="Reading.", calls=(("call_1", "read", {"path": "a.txt"}),)),
    VLLMReply(text="Adding.", calls=(("call_2", "add", {"a": 2, "b": 3}),)),
    VLLMReply(text="hello, 5"),
)


def says_hello(transcript: tuple[Message, ...]) -> float:
    last = transcript[-1]
    return 1.0 if isinstance(last, AssistantMessage) and "hello" in last.text else 0.0


async def test_rollout_returns_trajectory_reward_and_transcript(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    async with serve_fake_vllm(scripted_policy(REPLIES)) as url:
        async with OpenAIChat("policy", base_url=url, tokens=True, http=FAST) as model:
            with trio.fail_after(10):
                trajectory, reward, transcript = await rollout(
                    "read a.txt, then add 2 and 3",
                    model,
                    TOOLS,
                    reward=says_hello,
                    system_prompt="You are a test agent.",
                    transcript=path,
                )
    assert reward == 1.0
    check_transcript(transcript)
    assert load_transcript(path).messages == transcript
    assert len(trajectory.calls) == 3
    assert trajectory.breaks == ()
    (sample,) = trajectory.samples
    assert trajectory.reward == 1.0
    # The mask is 1 exactly on the three completions.
    assert sum(sample.loss_mask) == sum(len(c.completion_ids) for c in trajectory.calls)
    assert trajectory == Trajectory.from_transcript(transcript, reward=1.0)


async def test_an_async_reward_and_a_bad_one() -> None:
    async def later(transcript: tuple[Message, ...]) -> float:
        await trio.lowlevel.checkpoint()
        return 0.25

    async with serve_fake_vllm(scripted_policy(REPLIES[2:])) as url:
        async with OpenAIChat("policy", base_url=url, tokens=True, http=FAST) as model:
            result = await rollout("hi", model, reward=later)
            assert result.reward == 0.25
            assert result.result.reason == "stop"
            with pytest.raises(TypeError, match="not a number"):
                await rollout("hi", model, reward=lambda t: "high")  # type: ignore[arg-type,return-value]


async def test_run_rollouts_writes_one_line_per_sample_and_resumes(tmp_path: Path) -> None:
    tasks = [FleetTask(id="t1", prompt="read a.txt"), FleetTask(id="t2", prompt="again")]
    seen: list[tuple[str, Any]] = []

    def reward(transcript: tuple[Message, ...], task: FleetTask) -> float:
        seen.append((task.id, task.metadata["group"]))
        return says_hello(transcript)

    async with (
        serve_fake_vllm(scripted_policy(REPLIES)) as url,
        OpenAIChat("policy", base_url=url, tokens=True, http=FAST) as model,
    ):

        def factory(task: FleetTask) -> TaskSetup:
            return TaskSetup(model=model, tools=TOOLS, system_prompt="s")

        with trio.fail_after(20):
            summary = await run_rollouts(tasks, factory, out=tmp_path, reward=reward, n=3)
            again = await run_rollouts(tasks, factory, out=tmp_path, reward=reward, n=3)
    assert summary.written == 6
    assert again.written == 0
    assert again.fleet.skipped == 6
    lines = [json.loads(x) for x in (tmp_path / ROLLOUTS_FILE).read_text().splitlines()]
    assert sorted(x["id"] for x in lines) == [f"t{i}.s{k}" for i in (1, 2) for k in range(3)]
    assert sorted(seen) == sorted((x["id"], x["group"]) for x in lines)
    for x in lines:
        assert x["group"] == x["id"].split(".")[0]
        assert x["reward"] == 1.0
        assert (x["reason"], x["calls"], x["samples"], x["prefix_breaks"]) == ("stop", 3, 1, 0)
        messages = load_transcript(tmp_path / x["transcript"]).messages
        assert Trajectory.from_transcript(messages).summary()["tokens"] == x["tokens"]


async def test_run_rollouts_completes_lines_a_crash_left_out(tmp_path: Path) -> None:
    tasks = [FleetTask(id="t1", prompt="go")]
    async with (
        serve_fake_vllm(scripted_policy(REPLIES[2:])) as url,
        OpenAIChat("p", base_url=url, tokens=True, http=FAST) as model,
    ):

        def factory(task: FleetTask) -> TaskSetup:
            return TaskSetup(model=model)

        with trio.fail_after(20):
            await run_rollouts(tasks, factory, out=tmp_path, n=2)
            (tmp_path / ROLLOUTS_FILE).write_text(
                (tmp_path / ROLLOUTS_FILE).read_text().splitlines()[0] + '\n{"id": "t1.s'
            )  # the second line lost, a torn line left
            again = await run_rollouts(tasks, factory, out=tmp_path, n=2)
    assert again.written == 1
    lines = [json.loads(x) for x in (tmp_path / ROLLOUTS_FILE).read_text().splitlines()]
    assert sorted(x["id"] for x in lines) == ["t1.s0", "t1.s1"]
    assert all(x["reward"] is None and x["calls"] == 1 for x in lines)


async def test_run_rollouts_refuses_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="n must be"):
        await run_rollouts([], "x:y", out=tmp_path, n=0)
    with pytest.raises(ValueError, match="on_result"):
        await run_rollouts([], "x:y", out=tmp_path, on_result=print)
