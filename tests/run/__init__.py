"""Tests of ``trio_agent._run``: the loop, its cancellation, hooks, event delivery, batches."""
