"""Tests of ``trio_agent._agent``: the ``Agent``, its state and its queues."""
