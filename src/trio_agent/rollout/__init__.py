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

The implementation lives in private modules; this module re-exports the public names.
"""

from ._trajectory import CallSample as CallSample
from ._trajectory import PrefixBreak as PrefixBreak
from ._trajectory import Sample as Sample
from ._trajectory import Trajectory as Trajectory

__all__ = ["CallSample", "PrefixBreak", "Sample", "Trajectory"]
