"""Rollouts for training: token-exact trajectories, rewards, a GRPO group, from asyncio.

    python examples/rollouts.py [FOLDER]

A fake vLLM server on 127.0.0.1 (``trio_agent.testing.serve_fake_vllm``) stands in for
the policy: it streams its replies with their token ids and log-probabilities, as vLLM
does when a request says ``return_token_ids``. Point ``base_url`` at a real vLLM or
SGLang server and nothing else changes.

1. ``rollout``: one run of a task, scored by a reward function; its trajectory merges the
   three model calls into one sample whose loss mask is 1 on the model's tokens only.
2. ``run_rollouts``: a fleet in rollout mode — 4 samples of each task (a GRPO group),
   one scored line per sample in ``FOLDER/rollouts.jsonl``.
3. ``trio_agent.aio``: the same ``rollout`` awaited from an asyncio program (trio's
   guest mode on the asyncio loop).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

import trio_agent.aio
from trio_agent import AssistantMessage, Message, Tool, ToolCall, ToolContext
from trio_agent.fleet import FleetTask, TaskSetup
from trio_agent.providers import OpenAIChat
from trio_agent.rollout import rollout, run_rollouts
from trio_agent.testing import VLLMReply, scripted_policy, serve_fake_vllm

if TYPE_CHECKING:
    from collections.abc import Mapping

FILES = {"a.txt": "hello"}
POLICY = scripted_policy(
    (
        VLLMReply(text="Reading.", calls=(("call_1", "read", {"path": "a.txt"}),)),
        VLLMReply(text="Adding.", calls=(("call_2", "add", {"a": 2, "b": 3}),)),
        VLLMReply(text="a.txt says hello; 2 + 3 = 5."),
    )
)


async def read(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
    return FILES[args["path"]]


async def add(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
    return str(args["a"] + args["b"])


TOOLS = (
    Tool(
        name="read",
        description="Read a file.",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
        execute=read,
    ),
    Tool(
        name="add",
        description="Add two integers.",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        },
        execute=add,
    ),
)


def reward(transcript: tuple[Message, ...]) -> float:
    """1.0 when the final answer has the sum."""
    last = transcript[-1]
    return 1.0 if isinstance(last, AssistantMessage) and "= 5" in last.text else 0.0


async def one_rollout(url: str) -> None:
    async with OpenAIChat("policy", base_url=url, tokens=True) as model:
        trajectory, score, transcript = await rollout(
            "read a.txt, then add 2 and 3", model, TOOLS, reward=reward
        )
    (sample,) = trajectory.samples
    print(f"reward {score}, {len(transcript)} messages, {len(trajectory.calls)} model calls")
    print(
        f"merged sample: {len(sample.prompt_ids)} prompt ids, {len(sample.response_ids)} "
        f"response ids, {sum(sample.loss_mask)} of them the model's, "
        f"{len(trajectory.breaks)} prefix breaks"
    )
    (verl,) = trajectory.to_verl()
    print("verl fields:", sorted(verl))


async def group(url: str, out: Path) -> None:
    async with OpenAIChat("policy", base_url=url, tokens=True) as model:

        def factory(task: FleetTask) -> TaskSetup:
            return TaskSetup(model=model, tools=TOOLS)

        summary = await run_rollouts(
            [FleetTask(id="sum", prompt="read a.txt, then add 2 and 3")],
            factory,
            out=out,
            reward=lambda transcript, task: reward(transcript),
            n=4,
        )
    lines = [json.loads(x) for x in summary.path.read_text().splitlines()]
    print(f"rollouts.jsonl: {summary.written} lines, group {lines[0]['group']!r},", end=" ")
    print(f"rewards {sorted(x['reward'] for x in lines)}")


def from_asyncio(url: str) -> None:
    async def main() -> None:
        model = OpenAIChat("policy", base_url=url, tokens=True)
        rollouts = await asyncio.gather(
            *(trio_agent.aio.rollout("add 2 and 3", model, TOOLS, reward=reward) for _ in range(8))
        )
        await trio_agent.aio.run(model.aclose)
        await trio_agent.aio.aclose()
        print(f"from asyncio: {len(rollouts)} rollouts, rewards {[r.reward for r in rollouts]}")

    asyncio.run(main())


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())

    async def serve_and_run() -> None:
        async with serve_fake_vllm(POLICY) as url:
            await one_rollout(url)
            await group(url, out)
            # The asyncio program runs in a thread here only because this example's
            # server runs in trio; an RL framework's asyncio loop would just call it.
            await trio.to_thread.run_sync(from_asyncio, url)

    trio.run(serve_and_run)


if __name__ == "__main__":
    main()
