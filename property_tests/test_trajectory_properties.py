"""Merging a run's calls into samples: for any run with token ids, the loss mask marks
exactly the model's tokens, each merged sample re-splits into its calls, and a rewritten
history always starts a new sample (reported), never a silently wrong mask."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypothesis import given

from trio_agent.rollout import Trajectory
from trio_agent.testing import tokenised_runs

if TYPE_CHECKING:
    from trio_agent.testing._token_strategies import TokenisedRun


@given(tokenised_runs())
def test_merged_samples_are_exactly_the_expected_ones(run: TokenisedRun) -> None:
    trajectory = Trajectory.from_transcript(run.messages)
    assert len(trajectory.samples) == len(run.samples)
    for sample, segments in zip(trajectory.samples, run.samples, strict=True):
        prompt, *rest = segments
        assert sample.prompt_ids == prompt.ids
        assert sample.response_ids == tuple(i for s in rest for i in s.ids)
        # The mask is 1 exactly on the model's tokens.
        assert sample.loss_mask == tuple(int(s.model) for s in rest for _ in s.ids)
        expected_logprobs = tuple(
            lp for s in rest for lp in (s.logprobs if s.model else (0.0,) * len(s.ids))
        )
        assert sample.logprobs == expected_logprobs


@given(tokenised_runs())
def test_a_merged_sample_re_splits_into_its_calls(run: TokenisedRun) -> None:
    trajectory = Trajectory.from_transcript(run.messages)
    assert sorted(i for s in trajectory.samples for i in s.calls) == list(
        range(len(trajectory.calls))
    )
    for sample in trajectory.samples:
        sequence = sample.prompt_ids + sample.response_ids
        mask = (0,) * len(sample.prompt_ids) + sample.loss_mask
        for index in sample.calls:
            call = trajectory.calls[index]
            start = len(call.prompt_ids)
            end = start + len(call.completion_ids)
            assert sequence[:start] == call.prompt_ids
            assert sequence[start:end] == call.completion_ids
            assert set(mask[start:end]) <= {1}
        # The tokens after the last call's completion: none.
        last = trajectory.calls[sample.calls[-1]]
        assert len(sequence) == len(last.prompt_ids) + len(last.completion_ids)


@given(tokenised_runs())
def test_every_rewritten_history_starts_a_new_sample(run: TokenisedRun) -> None:
    trajectory = Trajectory.from_transcript(run.messages)
    assert [(b.call, b.position) for b in trajectory.breaks] == list(run.breaks)
    assert [s.calls[0] for s in trajectory.samples[1:]] == [b.call for b in trajectory.breaks]
