"""Tests of ``trio_agent._store``: JSONL transcripts on disk, also across a SIGKILL."""
