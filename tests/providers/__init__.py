"""Tests of ``trio_agent.providers`` against a real HTTP server on 127.0.0.1."""
