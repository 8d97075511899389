"""Tests of ``trio_agent.replay``: cassettes, recording and replaying."""
