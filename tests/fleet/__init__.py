"""Tests of ``trio_agent.fleet``: fleets on one machine and on a local Ray cluster."""
