"""What the sub-commands share: exit codes and where their files go by default."""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["INTERRUPTED", "OK", "PROBLEM", "USAGE", "state_file"]

OK = 0
"""The command did what was asked."""
PROBLEM = 1
"""The command ran and found a problem (a transcript that does not load, a diverging
replay, a run that did not end with ``stop``, a file that could not be written)."""
USAGE = 2
"""Bad usage: wrong options or arguments."""
INTERRUPTED = 130
"""Interrupted by Ctrl-C (128 + SIGINT, as shells report it)."""


def state_file(command: str) -> Path:
    """A new file name under ``$XDG_STATE_HOME/trio-agent/<command>`` (default
    ``~/.local/state``): ``<command>-<date>-<time>-<pid>.jsonl``. Creates nothing."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    name = f"{command}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.jsonl"
    return Path(base) / "trio-agent" / command / name
