"""Test kit: a scripted model, and checks users can run on their own tools and models.

``ScriptedModel``, the :class:`Script` values and ``assert_run_invariants`` need only
trio-agent itself. The Hypothesis strategies (``messages``, ``tool_calls``,
``assistant_replies``, ``transcripts``, ``scripts``, ``json_values``, ``tool_arguments``
— arguments drawn from a tool's own JSON Schema, with hypothesis-jsonschema —, and
``faults`` — faults over a recorded cassette, from :mod:`trio_agent.replay` —, and
``output_types`` — attrs classes, dataclasses and ``TypedDict`` s built on the fly for
structured output, with ``corruption_sites`` to break their values where the path is
known) need
Hypothesis (``pip install 'trio-agent[testing]'``): each is imported on its first access (the real
function, with its real signature), so importing this module — as ``trio-agent demo`` and
the benchmarks do — never requires it.
"""

import typing

from ._invariants import assert_run_invariants as assert_run_invariants
from ._invariants import run_invariant_violations as run_invariant_violations
from ._script import Script as Script
from ._script_rig import ScriptRig as ScriptRig
from ._script_run import ScriptRun as ScriptRun
from ._script_values import AbortScript as AbortScript
from ._script_values import Arrival as Arrival
from ._script_values import CallScript as CallScript
from ._script_values import HookFailure as HookFailure
from ._script_values import InterruptScript as InterruptScript
from ._script_values import ReplyScript as ReplyScript
from ._scripted import PausePoint as PausePoint
from ._scripted import ScriptedModel as ScriptedModel
from ._scripted import events_for as events_for
from ._vllm import VLLMReply as VLLMReply
from ._vllm import completion_ids as completion_ids
from ._vllm import fake_logprobs as fake_logprobs
from ._vllm import render_prompt as render_prompt
from ._vllm import scripted_policy as scripted_policy
from ._vllm import serve_fake_vllm as serve_fake_vllm
from ._vllm import vllm_response as vllm_response

# The strategies import Hypothesis, a test dependency. Type checkers see the real
# functions; at run time the module ``__getattr__`` (PEP 562) imports ``_strategies`` on
# the first access to one of them and hands back the real function, so
# ``help(trio_agent.testing.scripts)`` shows its real signature and importing this module
# never needs Hypothesis.
_STRATEGIES = frozenset(
    {
        "assistant_replies",
        "corruption_sites",
        "faults",
        "json_values",
        "messages",
        "output_types",
        "scripts",
        "tool_arguments",
        "tool_calls",
        "tokenised_runs",
        "transcripts",
    }
)

_OUTPUT_STRATEGIES = frozenset({"corruption_sites", "output_types"})

if typing.TYPE_CHECKING:
    from ._output_strategies import corruption_sites as corruption_sites
    from ._output_strategies import output_types as output_types
    from ._strategies import assistant_replies as assistant_replies
    from ._strategies import faults as faults
    from ._strategies import json_values as json_values
    from ._strategies import messages as messages
    from ._strategies import scripts as scripts
    from ._strategies import tokenised_runs as tokenised_runs
    from ._strategies import tool_arguments as tool_arguments
    from ._strategies import tool_calls as tool_calls
    from ._strategies import transcripts as transcripts
else:

    def __getattr__(name: str) -> typing.Any:
        """The strategy ``name``, imported (with Hypothesis) on first access.

        Raises:
            ImportError: Hypothesis is not installed (``pip install 'trio-agent[testing]'``).
            AttributeError: ``name`` is not a strategy of this module.
        """
        if name not in _STRATEGIES:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        try:
            # The output types' strategies live apart: importing them only when asked
            # keeps their constants out of the other strategies' draws.
            if name in _OUTPUT_STRATEGIES:
                from . import _output_strategies as module
            else:
                from . import _strategies as module
        except ModuleNotFoundError as exc:
            if exc.name != "hypothesis":
                raise
            raise ImportError(
                f"trio_agent.testing.{name} needs Hypothesis: pip install 'trio-agent[testing]'"
            ) from exc
        value = getattr(module, name)
        globals()[name] = value  # later accesses skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | _STRATEGIES)


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
    "VLLMReply",
    "assert_run_invariants",
    "assistant_replies",
    "completion_ids",
    "corruption_sites",
    "events_for",
    "fake_logprobs",
    "faults",
    "json_values",
    "messages",
    "output_types",
    "render_prompt",
    "run_invariant_violations",
    "scripted_policy",
    "scripts",
    "serve_fake_vllm",
    "tokenised_runs",
    "tool_arguments",
    "tool_calls",
    "transcripts",
    "vllm_response",
]
