"""What the tests share: builders of messages and tools, fakes (a real HTTP server on
127.0.0.1, MCP server processes) and checks. `programs/` holds the scripts tests run as
child processes."""
