"""trio-agent's benchmark suite (``python -m benchmarks`` or ``trio-agent bench``)."""
