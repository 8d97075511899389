"""Programs the tests start as child processes (run by path, or with ``python -m``)."""
