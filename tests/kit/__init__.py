"""What the tests share, each helper defined once: builders of messages and tools, fakes
(a real HTTP server on 127.0.0.1, MCP server processes) and checks. `programs/` holds the
scripts tests run as child processes.

- `loop`: messages (`user`, `reply`, `tool_use`, `call`), tools (`make_tool`, `sleeper`),
  readers of a run (`results_of`, `text_of`), an event `Recorder` and checks of a run;
- `agent`: the `Agent`'s probe tool, whose calls can be held at a gate, and a deadlock guard;
- `providers`: models against the test server, replies in each provider's wire format;
- `http_server`: the test server; `chat`: `trio-agent chat` driven in process or as a command;
- `mcp`: the MCP test server; `processes`: processes seen through `/proc`;
- `workspace`: the workspace tools called directly;
- `fleet`: checks of a fleet's results and transcripts.
"""
