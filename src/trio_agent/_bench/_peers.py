"""The peers: the same W1–W3 workloads on pydantic-ai, the OpenAI Agents SDK and LangGraph.

Optional: ``pip install -e '.[bench-peers]'``. A peer whose package is not importable is
skipped with one line saying so. Each peer lives in its own ``peer_*.py`` file of the
source checkout's ``benchmarks/`` folder (not in the installed package) that imports its
framework at the top, so nothing is imported unless the peer runs; without a checkout
the peers are skipped, also with one line each.

:func:`load_contender` finds any contender of a case by name — ours, the floor or a
peer — for the subprocesses that measure one repeat (``_fresh``, ``_rss``).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trio_agent._bench._harness import Case, Measure

__all__ = ["PEERS", "load_contender", "missing_peers", "peers_for"]

# display name -> (our module, the framework's import name, its PyPI distribution)
PEERS = {
    "pydantic-ai": ("benchmarks.peer_pydantic_ai", "pydantic_ai", "pydantic-ai-slim"),
    "openai-agents": ("benchmarks.peer_openai_agents", "agents", "openai-agents"),
    "langgraph": ("benchmarks.peer_langgraph", "langgraph", "langgraph"),
}

# Which peer function runs which case.
_BY_CASE = {"W1:no consumer": "w1", "W2:wide batch": "w2", "W3:many runs": "w3"}


def _installed(import_name: str) -> bool:
    try:
        return importlib.util.find_spec(import_name) is not None
    except (ImportError, ValueError):
        return False


def missing_peers() -> list[str]:
    """One line per peer that is not installed, or whose benchmark file is not there."""
    lines = []
    for name, (module_name, import_name, dist) in PEERS.items():
        if not _installed(import_name):
            lines.append(
                f"peer {name}: not installed ({dist}); pip install -e '.[bench-peers]' to compare"
            )
        elif not _installed(module_name):
            lines.append(
                f"peer {name}: {module_name} ships with the source only; run "
                "trio-agent bench from the root of a checkout to compare"
            )
    return lines


def peers_for(case: Case) -> dict[str, Measure]:
    """The installed peers' contenders for ``case`` (none for cases peers do not run)."""
    function = _BY_CASE.get(case.key)
    if function is None:
        return {}
    out: dict[str, Measure] = {}
    for name, (module_name, import_name, _) in PEERS.items():
        if _installed(import_name) and _installed(module_name):
            out[name] = getattr(importlib.import_module(module_name), function)
    return out


def load_contender(module_name: str, key: str, contender: str) -> tuple[Case, Measure]:
    """The case ``key`` of the workload module ``module_name`` and its contender.

    Raises:
        KeyError: no such case, or no such contender (a peer not installed).
    """
    module = importlib.import_module(module_name)
    case: Case = {c.key: c for c in module.CASES}[key]
    contenders = {"ours": case.ours, "floor": case.floor, **peers_for(case)}
    return case, contenders[contender]
