"""Tests of ``trio_agent.mcp`` against real MCP server processes."""
