"""What the bench's command lines share: argument checks and the JSON file.

Imports the standard library only, so that ``trio-agent``'s parser can use it without
importing the workloads.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def positive(text: str) -> int:
    """An ``argparse`` type: an integer of at least 1.

    Raises:
        argparse.ArgumentTypeError: below 1 (argparse turns it into a usage error).
        ValueError: not an integer (likewise).
    """
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def write_json(path: str, data: Any, command: str) -> bool:
    """Write ``data`` as indented JSON to ``path`` and say so on stdout.

    Returns:
        False when the file could not be written: the reason is on stderr, prefixed by
        ``command``; True otherwise.
    """
    try:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
    except OSError as exc:
        print(f"{command}: cannot write {path}: {exc}", file=sys.stderr)
        return False
    print(f"\nJSON written to {path}")
    return True
