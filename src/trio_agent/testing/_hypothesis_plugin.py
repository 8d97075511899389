"""Hypothesis entry point: ``st.from_type`` knows our message types and scripts.

Registered in ``pyproject.toml`` under ``[project.entry-points.hypothesis]``; Hypothesis
calls :func:`_hypothesis_setup_hook` when it is imported (unless
``HYPOTHESIS_NO_PLUGINS`` is set). This module imports nothing heavy at import time:
Hypothesis is still initialising when it loads us, so the imports happen in the hook.
"""

from __future__ import annotations

__all__ = ["_hypothesis_setup_hook"]


def _hypothesis_setup_hook() -> None:
    """Register a strategy for each message, content block and ``Script`` type.

    ``st.from_type(trio_agent.Message)`` then draws any message kind (it is a union of
    registered classes), each one JSON-safe, and ``st.from_type(Script)`` whole scripts.
    """
    from hypothesis import strategies as st

    from .. import _messages as m
    from . import _strategies as s
    from ._script import Script

    st.register_type_strategy(m.UserMessage, s.messages(roles=("user",)))
    st.register_type_strategy(m.AssistantMessage, s.assistant_replies())
    st.register_type_strategy(m.ToolResultMessage, s.messages(roles=("tool_result",)))
    st.register_type_strategy(m.CustomMessage, s.messages(roles=("custom",)))
    st.register_type_strategy(m.ToolCall, s.tool_calls())
    st.register_type_strategy(m.Text, s._texts())
    st.register_type_strategy(m.Thinking, s._thinking())
    st.register_type_strategy(m.Image, s._images())
    st.register_type_strategy(m.Usage, s._usages())
    st.register_type_strategy(Script, s.scripts())
