"""The rollout benchmark runs with the asyncio agent frameworks beside trio-agent.

The frameworks live in a virtual environment of their own (the ``bench-peers`` extra);
set ``BENCH_PEERS_PYTHON`` to its interpreter to run this test. Every contender must
finish every rollout with the right answer (its ``ok`` column); no timing is checked.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PEERS_PYTHON = os.environ.get("BENCH_PEERS_PYTHON")
ROOT = Path(__file__).parents[2]


@pytest.mark.skipif(not PEERS_PYTHON, reason="BENCH_PEERS_PYTHON is not set")
def test_every_contender_finishes_every_rollout() -> None:
    assert PEERS_PYTHON
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_rollouts", "--peers", PEERS_PYTHON, "4"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| 4 |")]
    contenders = {cells[1].strip(): cells[-1].strip() for cells in rows if len(cells) == 6}
    assert contenders == dict.fromkeys(
        ("trio-agent", "asyncio+httpx2", "pydantic-ai", "openai-agents", "langgraph"), "4"
    )
    ratios = {cells[1].strip() for cells in rows if len(cells) == 4}
    assert ratios == {"pydantic-ai", "openai-agents", "langgraph"}
