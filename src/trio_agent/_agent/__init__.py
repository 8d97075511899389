"""The stateful Agent: its state, its runs one at a time, open_agent.

This is the layer's surface: the public facade and the edges import the Agent from here
(``from .._agent import Agent``). It imports from ``_core`` and ``_run``.
"""

from ._agent import Agent, AgentState, open_agent

__all__ = ["Agent", "AgentState", "open_agent"]
