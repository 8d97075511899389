"""Trajectories: the token-level training data of one run, built from its transcript.

Theory of operation. Each assistant message that carries :class:`~trio_agent.Tokens`
is one model call: its prompt ids, its completion ids and their log-probabilities
(:class:`CallSample`). A multi-turn run is also one sequence: the second request's
prompt is the first prompt, the first completion, then the tokens the environment added
(tool results, a user message, the chat template's own glue), and so on. Merging walks
the calls in order keeping the sequence so far (``prompt + response``):

- a call whose prompt starts with the whole sequence so far *extends* it: the prompt's
  remaining tokens are environment tokens (loss mask 0, log-probability 0.0), then the
  completion is the model's (mask 1, its own log-probabilities);
- a call whose prompt does not (history compacted, a thinking block stripped, a
  template that re-renders earlier turns differently) *breaks* the prefix property: the
  merged sample so far is finished, a new one starts from this call's prompt, and the
  break is reported (:class:`PrefixBreak`) — never a mask that silently marks
  environment tokens as the model's or the reverse.

Assistant messages without tokens (a reply that failed or was aborted, or a provider
not asked to capture tokens) are not calls; they are listed in
:attr:`Trajectory.untokenised`. Anything of theirs a later prompt holds is environment
tokens there (mask 0): never trained on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from trio_agent import AssistantMessage, Message

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ["CallSample", "PrefixBreak", "Sample", "Trajectory"]


@attrs.frozen(kw_only=True)
class CallSample:
    """One model call: what the model read and what it generated.

    Attributes:
        message_index: the index of its assistant message in the transcript.
        prompt_ids: the prompt's token ids.
        completion_ids: the generated ids.
        logprobs: one log-probability per generated id, or ``()`` if not captured.
        model_version: the model version the server reported, if any.
        truncated: the reply hit its token limit (stop reason ``length``).
    """

    message_index: int
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    model_version: str | None
    truncated: bool


@attrs.frozen(kw_only=True)
class Sample:
    """Consecutive calls merged into one sequence: ``prompt_ids + response_ids``.

    Attributes:
        prompt_ids: the first call's prompt.
        response_ids: everything after it: completions and environment tokens.
        loss_mask: per response token, 1 if the model generated it, else 0.
        logprobs: per response token, the model's log-probability (0.0 for
            environment tokens); None if a merged call had none captured.
        calls: the indices (into ``Trajectory.calls``) of the calls merged here.
    """

    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    loss_mask: tuple[int, ...]
    logprobs: tuple[float, ...] | None
    calls: tuple[int, ...]


@attrs.frozen(kw_only=True)
class PrefixBreak:
    """A call whose prompt does not extend the sequence before it.

    Attributes:
        call: the index (into ``Trajectory.calls``) of the call that starts a new
            sample.
        position: the first token position where its prompt and the sequence so far
            differ (the length of its prompt if the prompt is a shorter prefix).
        expected: how many tokens the sequence so far had.
    """

    call: int
    position: int
    expected: int

    def __str__(self) -> str:
        return (
            f"call {self.call}: its prompt differs from the {self.expected} tokens before "
            f"it at position {self.position}; a new sample starts there"
        )


def _difference(prompt: tuple[int, ...], sequence: tuple[int, ...]) -> int | None:
    """Where ``prompt`` stops extending ``sequence``; None if it extends it."""
    n = len(sequence)
    if len(prompt) >= n and prompt[:n] == sequence:
        return None
    for i, (a, b) in enumerate(zip(prompt, sequence, strict=False)):
        if a != b:
            return i
    return min(len(prompt), n)


class _Builder:
    """One merged sample under construction."""

    def __init__(self, first: int, call: CallSample) -> None:
        self.prompt = call.prompt_ids
        self.response: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] | None = []
        self.calls = [first]
        self._add_completion(call)

    def sequence_length(self) -> int:
        return len(self.prompt) + len(self.response)

    def matches(self, prompt: tuple[int, ...]) -> int | None:
        """None if ``prompt`` extends the sequence so far, else where it differs."""
        return _difference(prompt, self.prompt + tuple(self.response))

    def extend(self, index: int, call: CallSample) -> None:
        environment = call.prompt_ids[self.sequence_length() :]
        self.response.extend(environment)
        self.mask.extend([0] * len(environment))
        if self.logprobs is not None:
            self.logprobs.extend([0.0] * len(environment))
        self.calls.append(index)
        self._add_completion(call)

    def _add_completion(self, call: CallSample) -> None:
        self.response.extend(call.completion_ids)
        self.mask.extend([1] * len(call.completion_ids))
        if self.logprobs is not None:
            if call.logprobs or not call.completion_ids:
                self.logprobs.extend(call.logprobs)
            else:
                self.logprobs = None

    def sample(self) -> Sample:
        return Sample(
            prompt_ids=self.prompt,
            response_ids=tuple(self.response),
            loss_mask=tuple(self.mask),
            logprobs=None if self.logprobs is None else tuple(self.logprobs),
            calls=tuple(self.calls),
        )


@attrs.frozen(kw_only=True)
class Trajectory:
    """The training data of one run: per-call samples, merged samples, prefix breaks.

    Build one with :meth:`from_transcript`; export it with :meth:`to_verifiers`,
    :meth:`to_skyrl` or :meth:`to_verl`.

    Attributes:
        calls: one :class:`CallSample` per assistant message with tokens, in order.
        samples: the merged samples (one per run unless the prefix property broke).
        breaks: where it broke, one :class:`PrefixBreak` per sample after the first.
        untokenised: transcript indices of assistant messages without tokens.
        reward: the run's reward, if one was given.
        stop_reason: the last assistant message's stop reason ("" if none).
    """

    calls: tuple[CallSample, ...]
    samples: tuple[Sample, ...]
    breaks: tuple[PrefixBreak, ...]
    untokenised: tuple[int, ...]
    reward: float | None = None
    stop_reason: str = ""

    @classmethod
    def from_transcript(
        cls, messages: Iterable[Message], *, reward: float | None = None
    ) -> Trajectory:
        """Build the trajectory of a transcript (see the module docstring for the rules).

        Args:
            messages: the run's messages, in order (``result.transcript``, or
                ``load_transcript(path).messages``).
            reward: the run's reward, kept and exported with the samples.

        Returns:
            The trajectory. A transcript without tokens gives one with no calls and no
            samples (its assistant messages listed in ``untokenised``).
        """
        calls: list[CallSample] = []
        untokenised: list[int] = []
        stop_reason = ""
        for i, message in enumerate(messages):
            if type(message) is not AssistantMessage:
                continue
            stop_reason = message.stop_reason
            tokens = message.tokens
            if tokens is None:
                untokenised.append(i)
                continue
            calls.append(
                CallSample(
                    message_index=i,
                    prompt_ids=tokens.prompt_ids,
                    completion_ids=tokens.completion_ids,
                    logprobs=tokens.logprobs,
                    model_version=tokens.model_version,
                    truncated=message.stop_reason == "length",
                )
            )
        samples: list[Sample] = []
        breaks: list[PrefixBreak] = []
        current: _Builder | None = None
        for index, call in enumerate(calls):
            if current is None:
                current = _Builder(index, call)
                continue
            position = current.matches(call.prompt_ids)
            if position is None:
                current.extend(index, call)
                continue
            breaks.append(
                PrefixBreak(call=index, position=position, expected=current.sequence_length())
            )
            samples.append(current.sample())
            current = _Builder(index, call)
        if current is not None:
            samples.append(current.sample())
        return cls(
            calls=tuple(calls),
            samples=tuple(samples),
            breaks=tuple(breaks),
            untokenised=tuple(untokenised),
            reward=reward,
            stop_reason=stop_reason,
        )

    # --- exporters ----------------------------------------------------------------------

    def to_verifiers(self) -> list[dict[str, Any]]:
        """One dict per call with the fields of verifiers' ``TurnTokens``
        (``verifiers.v1.types``, verifiers 0.4): ``prompt_ids``, ``completion_ids``,
        ``completion_logprobs``. ``TurnTokens.model_validate(row)`` takes each as it is;
        verifiers builds its per-branch training sample (the mask, the logprobs spread
        over the sequence) from these itself. Plain lists, JSON-ready.

        verifiers before 0.4 read ``TrajectoryStepTokens`` (with prompt and completion
        masks); that type is gone from verifiers 0.4 and is not produced."""
        return [
            {
                "prompt_ids": list(c.prompt_ids),
                "completion_ids": list(c.completion_ids),
                "completion_logprobs": list(c.logprobs),
            }
            for c in self.calls
        ]

    def to_skyrl(self) -> list[dict[str, Any]]:
        """One dict per merged sample with the fields of SkyRL's ``TrajectoryOutput``
        (``skyrl.train.generators.skyrl_gym_generator``, SkyRL 0.3): ``prompt_ids``,
        ``response_ids``, ``reward`` (the run's, 0.0 if none), ``stop_reason``
        (vLLM's finish reason, which SkyRL compares with: ``length`` if the sample's
        last call hit its token limit, ``abort`` for the last sample of a run that
        ended in an error or an abort, else ``stop``), ``loss_mask``,
        ``rollout_logprobs`` (None if not captured), ``env_metrics`` (the prefix breaks,
        counted); its optional fields are left to their defaults, so
        ``TrajectoryOutput(**row)`` builds one."""
        return [
            {
                "prompt_ids": list(s.prompt_ids),
                "response_ids": list(s.response_ids),
                "reward": self._reward(),
                "stop_reason": self._stop_reason(s),
                "loss_mask": list(s.loss_mask),
                "rollout_logprobs": None if s.logprobs is None else list(s.logprobs),
                "env_metrics": {"prefix_breaks": len(self.breaks)},
            }
            for s in self.samples
        ]

    def to_verl(self) -> list[dict[str, Any]]:
        """One dict per merged sample with the fields of verl's ``AgentLoopOutput``
        (``verl.experimental.agent_loop``, verl 0.9): ``prompt_ids``, ``response_ids``,
        ``response_mask``, ``response_logprobs`` (None if not captured),
        ``reward_score``, ``num_turns`` and ``metrics``, so ``AgentLoopOutput(**row)``
        builds one.

        ``num_turns`` counts chat turns as verl's tool agent loop does: the first
        prompt, each model reply, and each environment turn between two replies (two
        per merged call). ``metrics`` is empty: verl's ``AgentLoopMetrics`` are its own
        timings, left to their defaults."""
        return [
            {
                "prompt_ids": list(s.prompt_ids),
                "response_ids": list(s.response_ids),
                "response_mask": list(s.loss_mask),
                "response_logprobs": None if s.logprobs is None else list(s.logprobs),
                "num_turns": 2 * len(s.calls),
                "reward_score": self.reward,
                "metrics": {},
            }
            for s in self.samples
        ]

    def _reward(self) -> float:
        return 0.0 if self.reward is None else float(self.reward)

    def _stop_reason(self, sample: Sample) -> str:
        """The engine's finish reason for a sample, in vLLM's words (which SkyRL's
        overlong filtering and zero-reward-unless-stop compare with): ``length`` if its
        last call hit the token limit, ``abort`` for the last sample of a run that
        ended in an error or an abort, else ``stop``."""
        if self.calls[sample.calls[-1]].truncated:
            return "length"
        last = sample is self.samples[-1]
        return "abort" if last and self.stop_reason in ("error", "aborted") else "stop"

    def summary(self) -> Mapping[str, Any]:
        """Counts for a results line: calls, samples, breaks, model and environment
        tokens."""
        model = sum(len(c.completion_ids) for c in self.calls)
        total = sum(len(s.prompt_ids) + len(s.response_ids) for s in self.samples)
        return {
            "calls": len(self.calls),
            "samples": len(self.samples),
            "prefix_breaks": len(self.breaks),
            "model_tokens": model,
            "tokens": total,
        }
