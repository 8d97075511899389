"""Trajectory.from_transcript on hand-made runs, and the exporters' shapes."""

from __future__ import annotations

import json

from trio_agent import AssistantMessage, Message, Text, Tokens, UserMessage
from trio_agent.rollout import PrefixBreak, Trajectory

# verifiers' TurnTokens (verifiers 0.4: verifiers/v1/types.py), SkyRL's TrajectoryOutput
# (SkyRL 0.3: skyrl/train/generators/skyrl_gym_generator.py) and verl's AgentLoopOutput
# (verl 0.9: verl/experimental/agent_loop/agent_loop.py): the field names the frameworks
# read. tests/rollout/test_framework_types.py checks the rows against the frameworks'
# own classes where they are installed.
VERIFIERS_TURN_TOKENS = {"prompt_ids", "completion_ids", "completion_logprobs"}
SKYRL_TRAJECTORY_OUTPUT = {
    "prompt_ids",
    "response_ids",
    "reward",
    "stop_reason",
    "loss_mask",
    "rollout_logprobs",
    "env_metrics",
}
VERL_AGENT_LOOP_OUTPUT = {
    "prompt_ids",
    "response_ids",
    "response_mask",
    "response_logprobs",
    "num_turns",
    "reward_score",
    "metrics",
}


def reply(
    prompt: list[int],
    completion: list[int],
    logprobs: list[float] | None = None,
    stop: str = "stop",
) -> AssistantMessage:
    return AssistantMessage(
        content=(Text(text="r"),),
        stop_reason=stop,  # type: ignore[arg-type]
        tokens=Tokens(
            prompt_ids=prompt,
            completion_ids=completion,
            logprobs=[-0.5] * len(completion) if logprobs is None else logprobs,
        ),
    )


def run() -> list[Message]:
    return [
        UserMessage.text("task"),
        reply([1, 2, 3], [10, 11], [-0.1, -0.2]),
        UserMessage.text("tool output"),
        reply([1, 2, 3, 10, 11, 7, 8], [12], [-0.3]),
        UserMessage.text("more"),
        reply([1, 2, 3, 10, 11, 7, 8, 12, 9], [13, 14], [-0.4, -0.5], stop="length"),
    ]


def test_one_merged_sample_with_its_mask_and_logprobs() -> None:
    t = Trajectory.from_transcript(run(), reward=1.5)
    assert len(t.calls) == 3
    assert [c.message_index for c in t.calls] == [1, 3, 5]
    assert t.breaks == ()
    (s,) = t.samples
    assert s.prompt_ids == (1, 2, 3)
    assert s.response_ids == (10, 11, 7, 8, 12, 9, 13, 14)
    assert s.loss_mask == (1, 1, 0, 0, 1, 0, 1, 1)
    assert s.logprobs == (-0.1, -0.2, 0.0, 0.0, -0.3, 0.0, -0.4, -0.5)
    assert s.calls == (0, 1, 2)
    assert t.reward == 1.5
    assert t.summary() == {
        "calls": 3,
        "samples": 1,
        "prefix_breaks": 0,
        "model_tokens": 5,
        "tokens": 11,
    }


def test_a_rewritten_history_starts_a_new_sample_and_is_reported() -> None:
    messages = run()
    # The third prompt drops the completion [12] (a stripped thinking block, say).
    messages[5] = reply([1, 2, 3, 10, 11, 7, 8, 9], [13], [-0.4])
    t = Trajectory.from_transcript(messages)
    assert t.breaks == (PrefixBreak(call=2, position=7, expected=8),)
    assert "call 2" in str(t.breaks[0])
    first, second = t.samples
    assert first.calls == (0, 1)
    assert first.loss_mask == (1, 1, 0, 0, 1)
    assert second.calls == (2,)
    assert second.prompt_ids == (1, 2, 3, 10, 11, 7, 8, 9)
    assert second.response_ids == (13,)
    assert second.loss_mask == (1,)


def test_a_shorter_prompt_is_a_break_too() -> None:
    messages: list[Message] = [reply([1, 2, 3], [4]), reply([1, 2], [5])]
    t = Trajectory.from_transcript(messages)
    assert t.breaks == (PrefixBreak(call=1, position=2, expected=4),)


def test_replies_without_tokens_are_listed_and_never_trained_on() -> None:
    aborted = AssistantMessage(content=(Text(text="partial"),), stop_reason="aborted")
    messages: list[Message] = [
        UserMessage.text("task"),
        reply([1], [2]),
        aborted,
        UserMessage.text("again"),
        reply([1, 2, 40, 41], [3]),
    ]
    t = Trajectory.from_transcript(messages)
    assert t.untokenised == (2,)
    (s,) = t.samples
    assert s.loss_mask == (1, 0, 0, 1)  # the aborted reply's text is environment here


def test_a_call_without_logprobs_makes_the_samples_logprobs_none() -> None:
    t = Trajectory.from_transcript([reply([1], [2], []), reply([1, 2], [3])])
    assert t.samples[0].logprobs is None
    assert t.to_verl()[0]["response_logprobs"] is None


def test_no_tokens_no_samples() -> None:
    t = Trajectory.from_transcript([UserMessage.text("hi")])
    assert (t.calls, t.samples, t.breaks) == ((), (), ())


def test_exporters_have_the_frameworks_fields_and_json_values() -> None:
    t = Trajectory.from_transcript(run(), reward=2.0)
    steps = t.to_verifiers()
    assert len(steps) == 3
    for step, call in zip(steps, t.calls, strict=True):
        assert set(step) == VERIFIERS_TURN_TOKENS
        assert step["prompt_ids"] == list(call.prompt_ids)
        assert step["completion_ids"] == list(call.completion_ids)
        assert step["completion_logprobs"] == list(call.logprobs)
    (skyrl,) = t.to_skyrl()
    assert set(skyrl) == SKYRL_TRAJECTORY_OUTPUT
    assert skyrl["loss_mask"] == list(t.samples[0].loss_mask)
    assert skyrl["reward"] == 2.0
    assert skyrl["stop_reason"] == "length"
    assert len(skyrl["rollout_logprobs"]) == len(skyrl["response_ids"])
    (verl,) = t.to_verl()
    assert set(verl) == VERL_AGENT_LOOP_OUTPUT
    assert verl["response_mask"] == skyrl["loss_mask"]
    assert verl["num_turns"] == 6  # the prompt, 3 replies, 2 environment turns
    assert verl["reward_score"] == 2.0
    json.dumps([steps, skyrl, verl])  # plain JSON values


def test_skyrl_stop_reasons_are_the_engines_finish_reasons_per_sample() -> None:
    """SkyRL keeps the mask and reward only of samples whose stop reason is vLLM's
    ``stop``: each sample says how its own last call ended (``tool_use`` is the engine
    stopping on its own), the last one ``abort`` when the run ended in an error."""
    ended = AssistantMessage(content=(Text(text="x"),), stop_reason="error")
    messages: list[Message] = [
        reply([1], [2], stop="length"),
        reply([9], [3], stop="tool_use"),  # a break: a second sample
        reply([9, 3, 4], [5], stop="tool_use"),
        reply([7], [6], stop="stop"),  # a third
    ]
    t = Trajectory.from_transcript(messages)
    assert [s["stop_reason"] for s in t.to_skyrl()] == ["length", "stop", "stop"]
    t = Trajectory.from_transcript([*messages, ended])
    assert [s["stop_reason"] for s in t.to_skyrl()] == ["length", "stop", "abort"]
