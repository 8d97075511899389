"""Hypothesis entry point: ``st.from_type`` knows our message types and scripts.

Registered in ``pyproject.toml`` under ``[project.entry-points.hypothesis]``; Hypothesis
calls :func:`_hypothesis_setup_hook` while it is being imported (unless
``HYPOTHESIS_NO_PLUGINS`` is set). That may happen *because* ``_strategies`` is being
imported, so the hook only registers resolvers: each imports ``_strategies`` when
``from_type`` first needs it, never at registration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["_hypothesis_setup_hook"]


def _resolver(name: str, **options: Any) -> Callable[[type], Any]:
    def resolve(_: type) -> Any:
        from . import _strategies

        return getattr(_strategies, name)(**options)

    return resolve


def _hypothesis_setup_hook() -> None:
    """Register a strategy for each message, content block and ``Script`` type.

    ``st.from_type(trio_agent.Message)`` then draws any message kind (a union of
    registered classes), each one JSON-safe, and ``st.from_type(Script)`` whole scripts.
    """
    from hypothesis import strategies as st

    from .. import _core as m
    from ._script import Script

    st.register_type_strategy(m.UserMessage, _resolver("messages", roles=("user",)))
    st.register_type_strategy(m.AssistantMessage, _resolver("assistant_replies"))
    st.register_type_strategy(m.ToolResultMessage, _resolver("messages", roles=("tool_result",)))
    st.register_type_strategy(m.CustomMessage, _resolver("messages", roles=("custom",)))
    st.register_type_strategy(m.ToolCall, _resolver("tool_calls"))
    st.register_type_strategy(m.Text, _resolver("text_blocks"))
    st.register_type_strategy(m.Thinking, _resolver("thinking_blocks"))
    st.register_type_strategy(m.Image, _resolver("image_blocks"))
    st.register_type_strategy(m.Usage, _resolver("usages"))
    st.register_type_strategy(Script, _resolver("scripts"))
