"""trio-agent's tests. The folders follow the package: `core/` (``trio_agent._core``: values
and rules), `run/` (``_run``: the trio driver), `agent/` (``_agent``), `store/` (``_store``:
files on disk), then one folder per edge (`providers/`, `tools/`, `mcp/`, `fleet/`,
`replay/`, `telemetry/`, `testing/`, `cli/`, `bench/`); the tests of the project as a
whole (docs, README, packaging, layering) stay here. `kit/` is what tests share."""
