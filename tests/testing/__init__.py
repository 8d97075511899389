"""Tests of ``trio_agent.testing``: scripted runs, the invariant checker, the strategies."""
