"""Tests of ``trio_agent.telemetry``: spans, log lines and usage totals."""
