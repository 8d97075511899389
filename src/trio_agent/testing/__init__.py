"""Test kit: a scripted model, and checks users can run on their own tools and models.

``ScriptedModel``, the :class:`Script` values and ``assert_run_invariants`` need only
trio-agent itself. The Hypothesis strategies (``messages``, ``tool_calls``,
``assistant_replies``, ``transcripts``, ``scripts``, ``json_values``, and ``faults``
— faults over a recorded cassette, from :mod:`trio_agent.replay`) need Hypothesis
(``pip install 'trio-agent[test]'``): each is imported on its first call, so importing
this module — as ``trio-agent demo`` and the benchmarks do — never requires it.
"""

import typing

from ._invariants import assert_run_invariants as assert_run_invariants
from ._invariants import run_invariant_violations as run_invariant_violations
from ._script import AbortScript as AbortScript
from ._script import Arrival as Arrival
from ._script import CallScript as CallScript
from ._script import HookFailure as HookFailure
from ._script import InterruptScript as InterruptScript
from ._script import ReplyScript as ReplyScript
from ._script import Script as Script
from ._script import ScriptRig as ScriptRig
from ._script import ScriptRun as ScriptRun
from ._scripted import PausePoint as PausePoint
from ._scripted import ScriptedModel as ScriptedModel
from ._scripted import events_for as events_for


def _deferred(name: str) -> typing.Any:
    """A stand-in for the strategy ``name`` that imports Hypothesis when first called."""

    def strategy(*args: typing.Any, **kwargs: typing.Any) -> typing.Any:
        try:
            from . import _strategies
        except ModuleNotFoundError as exc:
            if exc.name != "hypothesis":
                raise
            raise ImportError(
                f"trio_agent.testing.{name}() needs Hypothesis: pip install 'trio-agent[test]'"
            ) from exc
        return getattr(_strategies, name)(*args, **kwargs)

    strategy.__name__ = strategy.__qualname__ = name
    strategy.__module__ = __name__
    strategy.__doc__ = f"The Hypothesis strategy ``_strategies.{name}`` (imported on first call)."
    return strategy


# The strategies import Hypothesis, a test dependency: type checkers see the real
# functions, the running program a stand-in that imports them on first call.
if typing.TYPE_CHECKING:
    from ._strategies import assistant_replies as assistant_replies
    from ._strategies import faults as faults
    from ._strategies import json_values as json_values
    from ._strategies import messages as messages
    from ._strategies import scripts as scripts
    from ._strategies import tool_calls as tool_calls
    from ._strategies import transcripts as transcripts
else:
    assistant_replies = _deferred("assistant_replies")
    faults = _deferred("faults")
    json_values = _deferred("json_values")
    messages = _deferred("messages")
    scripts = _deferred("scripts")
    tool_calls = _deferred("tool_calls")
    transcripts = _deferred("transcripts")

__all__ = [
    "AbortScript",
    "Arrival",
    "CallScript",
    "HookFailure",
    "InterruptScript",
    "PausePoint",
    "ReplyScript",
    "Script",
    "ScriptRig",
    "ScriptRun",
    "ScriptedModel",
    "assert_run_invariants",
    "assistant_replies",
    "events_for",
    "faults",
    "json_values",
    "messages",
    "run_invariant_violations",
    "scripts",
    "tool_calls",
    "transcripts",
]
