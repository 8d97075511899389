"""Tests of ``trio_agent._bench``: every benchmark workload runs."""
