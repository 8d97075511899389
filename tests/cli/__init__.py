"""Tests of ``trio_agent.cli``: the ``trio-agent`` commands, as subprocesses and in process."""
