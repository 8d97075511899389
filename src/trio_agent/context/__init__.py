"""Long runs within the model's context window: token accounting and context policies.

A context policy shapes the history each request shows the model; the transcript itself
is never changed. Pass one as ``LoopConfig(context=...)`` (or ``open_agent(...,
context=...)``)::

    from trio_agent.context import ElideToolOutputs, KeepRecent, Summarize, compose

    config = LoopConfig(context=compose(ElideToolOutputs(older_than=2), KeepRecent(turns=20)))
    config = LoopConfig(context=Summarize(trigger=0.8, keep_recent=4))

Then each compaction is reported as a ``ContextCompacted`` event (which a
``JsonlTranscript`` records as a ``"compaction"`` marker line), and a request the
provider refuses as too long for the window is sent again once after the policy
compacted harder; a second refusal ends the run ``context_overflow``. A policy is also
a plain ``transform_context`` hook (then with its own ``window``, no events and no
retry).

Tokens: the provider's usage calibrates an estimate from characters (no tokenizer is
downloaded); the window comes from ``ModelOptions.context_window``, a policy's
``window``, or a table of known models (:func:`context_window`).

After loading a transcript, :func:`model_view` rebuilds the history the model saw, and
a :class:`Summarize` policy's :meth:`~Summarize.resume` takes its summary up again.
"""

from .._core import ContextPolicy, ContextRequest, ContextView, is_context_overflow
from ._plan import Plan, model_view, turn_starts
from ._policies import Budget, ElideToolOutputs, KeepRecent, Policy, compose
from ._summarize import Summarize
from ._tokens import TokenCounter, context_window, message_chars

__all__ = [
    "Budget",
    "ContextPolicy",
    "ContextRequest",
    "ContextView",
    "ElideToolOutputs",
    "KeepRecent",
    "Plan",
    "Policy",
    "Summarize",
    "TokenCounter",
    "compose",
    "context_window",
    "is_context_overflow",
    "message_chars",
    "model_view",
    "turn_starts",
]
