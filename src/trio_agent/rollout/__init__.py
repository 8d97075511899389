"""Rollouts for reinforcement learning: token-exact trajectories of agent runs.

Point ``OpenAIChat(..., tokens=True)`` at a vLLM or SGLang server and every finished
reply keeps the exact token ids and log-probabilities the server sampled
(``AssistantMessage.tokens``, written with the transcript). This module turns a run into
training data:

- :class:`Trajectory` — ``Trajectory.from_transcript(messages, reward=...)``: one sample
  per model call, and the calls merged into one sequence with a loss mask (1 for the
  model's tokens, 0 for tool results and other environment tokens); a call whose prompt
  does not extend the previous prompt and completion starts a new sample and is reported
  as a :class:`PrefixBreak`. Exporters give the shapes verifiers, SkyRL and verl consume.
- :func:`rollout` — ``trajectory, reward, transcript = await rollout(task, model, tools,
  reward=fn)``: one run, scored.
- :func:`run_rollouts` — a fleet in rollout mode: ``n`` samples per task (a GRPO group),
  each scored, one line per sample in ``out/rollouts.jsonl``.

The implementation lives in private modules; this module re-exports the public names.
"""

from ._fleet import RolloutFleetSummary as RolloutFleetSummary
from ._fleet import run_rollouts as run_rollouts
from ._rollout import Reward as Reward
from ._rollout import Rollout as Rollout
from ._rollout import rollout as rollout
from ._trajectory import CallSample as CallSample
from ._trajectory import PrefixBreak as PrefixBreak
from ._trajectory import Sample as Sample
from ._trajectory import Trajectory as Trajectory

__all__ = [
    "CallSample",
    "PrefixBreak",
    "Reward",
    "Rollout",
    "RolloutFleetSummary",
    "Sample",
    "Trajectory",
    "rollout",
    "run_rollouts",
]
