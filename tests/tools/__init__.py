"""Tests of ``trio_agent.tools``: the workspace's bash, file and search tools."""
