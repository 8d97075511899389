"""Tests of ``trio_agent._core``: messages, arguments, call ids, pairing, serde, ``@tool``."""
