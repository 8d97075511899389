"""The instruction-count mode of the benchmarks still works.

The count itself needs valgrind (skipped without it) and is slow under it: one small
selection (W3 at two runs) proves the whole path — the counted processes, the subtraction
of the zero-repeat process, the ratios and the JSON. The processes' own protocol (the
shared preamble, the repeats) runs without valgrind too, and so do the usage errors.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from trio_agent._bench import instructions

if TYPE_CHECKING:
    from pathlib import Path

VALGRIND = shutil.which("valgrind")


def _child_command(spec: dict[str, object]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "trio_agent._bench.instructions",
        "--child",
        json.dumps(spec),
    ]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
    return env


def test_every_ratio_names_a_case_with_both_sides() -> None:
    contenders, aliases = instructions._plan(instructions.RATIOS)
    # run_agent_loop is a side of two ratios and is counted once.
    assert len(contenders) == 7
    assert len(aliases) == 2 * len(instructions.RATIOS)
    assert aliases["W1:via the Agent vs run_agent_loop floor"] == "W1:no consumer ours"
    assert set(aliases.values()) == {c.label for c in contenders}


def test_the_counted_process_runs_its_repeats_and_fails_loudly() -> None:
    contenders, _ = instructions._plan(instructions.RATIOS)
    spec = {
        "sizes": {"W1": 2, "W3": 2},
        "contenders": [c.__dict__ for c in contenders],
        "measure": 0,
        "repeats": 1,
    }
    done = subprocess.run(
        _child_command(spec), env=_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    # A process that cannot run its workload fails (and so does the count).
    missing = {**spec["contenders"][0], "case": "W1:no such case"}
    broken = {**spec, "contenders": [missing]}
    done = subprocess.run(
        _child_command(broken), env=_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0


def test_unknown_workload_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert instructions.main(["--only", "W5", "--quiet"]) == 2
    assert "unknown workload W5" in capsys.readouterr().err
    assert [r.key for r in instructions.select(["w3"])] == ["W3"]
    assert [r.key for r in instructions.select(["W1"])] == ["W1", "agent", "subscriber"]


def test_missing_valgrind_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="valgrind is not installed"):
        instructions.count_instructions(valgrind=str(tmp_path / "no-valgrind"))


@pytest.mark.skipif(VALGRIND is None, reason="valgrind is not installed")
def test_counts_w3_at_a_tiny_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "instructions.json"
    code = instructions.main(["--only", "W3", "--runs", "2", "--quiet", "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "W3 per run" in printed.out
    data = json.loads(out.read_text())
    (ratio,) = data["ratios"].values()
    counts = data["counts"]
    ours, floor = counts["W3:many runs ours"], counts["W3:many runs floor"]
    for side in (ours, floor):
        assert side["size"] == 2
        assert side["repeats"] == 1
        # The repeats are counted, the interpreter's start-up and imports (the same in
        # the zero-repeat process) are not: far more than the repeats at this size.
        assert side["baseline"] > 10 * side["counted"] > 0
        assert side["per_unit"] == side["counted"] / 2
    assert ratio["ratio"] == pytest.approx(ours["per_unit"] / floor["per_unit"])
    # Ours does everything the floor does and more.
    assert ratio["ratio"] > 1
