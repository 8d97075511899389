"""The README's example runs as written and prints what the README says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_round_trip_example_runs() -> None:
    text = README.read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.S)
    assert code is not None, "README has no python example"
    done = subprocess.run(
        [sys.executable, "-c", code.group(1)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "user → assistant → tool_result → assistant 2 stop"
    assert "# user → assistant → tool_result → assistant 2 stop" in code.group(1)
