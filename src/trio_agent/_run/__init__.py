"""The trio driver of one run: stream, batch, event delivery, the runner, the entry points."""
