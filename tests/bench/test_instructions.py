"""The instruction-count mode of the bench (``trio-agent bench --instructions``) works.

The count itself needs valgrind (skipped without it) and is slow under it: one small
selection (W3 at its quick size) proves the whole path through the command — the counted
processes, the subtraction of the zero-repeat process, the ratio, its target and the JSON.
The processes' own protocol (the shared preamble, the repeats) runs without valgrind for
every contender, and so do the usage errors and the error when valgrind is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from trio_agent import cli
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


def test_each_workload_has_its_own_preamble_and_zero_repeat_process() -> None:
    # W3's warm-up sleeps on the real clock: in W1's processes it would move their counts
    # by a few hundred thousand instructions from one run to the next.
    contenders, _ = instructions._plan(instructions.RATIOS)
    specs, names, measured = instructions._processes(contenders, {"W1": 2, "W3": 2}, 3)
    assert len(specs) == len(contenders) + 2
    zero = [i for i, counted in enumerate(measured) if counted is None]
    assert [names[i] for i in zero] == ["W1's zero-repeat process", "W3's zero-repeat process"]
    for i, spec in enumerate(specs):
        workloads = {c["workload"] for c in spec["contenders"]}
        assert len(workloads) == 1
        # A process's preamble is that of its zero-repeat process, but for what it repeats.
        baseline = specs[max(z for z in zero if z <= i)]
        assert spec["contenders"] == baseline["contenders"]
        counted = measured[i]
        if counted is None:
            assert spec["repeats"] == 0
        else:
            assert spec["repeats"] == 3
            assert workloads == {counted.workload}
            assert spec["contenders"][spec["measure"]] == counted.__dict__


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


def test_missing_valgrind_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # No valgrind on PATH (an empty folder is all of it).
    monkeypatch.setenv("PATH", str(tmp_path))
    assert cli.main(["bench", "--instructions", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trio-agent bench --instructions: valgrind is not installed")
    assert err.count("\n") == 1
    with pytest.raises(FileNotFoundError, match="valgrind is not installed"):
        instructions.count_instructions(valgrind=str(tmp_path / "no-valgrind"))


def test_options_that_do_not_apply_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "--instructions", "--in-process", "--quiet"]) == 2
    assert "--in-process does not apply" in capsys.readouterr().err
    assert cli.main(["bench", "--instructions", "--only", "W2", "--quiet"]) == 2
    assert "the instruction counts cover W1 and W3" in capsys.readouterr().err


def test_the_help_gives_the_sizes_counted(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["bench", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"W1 at T = {instructions.TURNS:,} (quick {instructions.QUICK_TURNS:,})" in help_text
    assert f"W3 at R = {instructions.RUNS:,} (quick {instructions.QUICK_RUNS:,})" in help_text


# CI's machines have valgrind (the project's machine image ships it); a machine without it
# cannot count instructions at all, which the test above covers.
@pytest.mark.skipif(VALGRIND is None, reason="valgrind is not installed: nothing to count with")
# Three processes under valgrind, each mostly the interpreter's start-up and imports
# (about 20 s of CPU): minutes on a loaded 2-CPU machine.
@pytest.mark.timeout(900)
def test_counts_w3_through_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "instructions.json"
    code = cli.main(
        ["bench", "--instructions", "--quick", "--only", "W3", "--quiet", "--json", str(out)]
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "W3 per run" in printed.out
    assert "≤ 2×" in printed.out
    data = json.loads(out.read_text())
    (ratio,) = data["ratios"].values()
    counts = data["counts"]
    ours, floor = counts["W3:many runs ours"], counts["W3:many runs floor"]
    for side in (ours, floor):
        assert side["size"] == instructions.QUICK_RUNS
        assert side["repeats"] == 1
        # The repeats are counted, the interpreter's start-up and imports (the same in
        # the zero-repeat process) are not: far more than the repeats at this size.
        assert side["baseline"] > 5 * side["counted"] > 0
        assert side["per_unit"] == side["counted"] / instructions.QUICK_RUNS
    assert ratio["ratio"] == pytest.approx(ours["per_unit"] / floor["per_unit"])
    assert ratio["target"] == 2.0
    # Ours does everything the floor does and more, and not ten times more.
    assert 1 < ratio["ratio"] < 10
    verdict = "met" if ratio["ratio"] <= 2.0 else "NOT MET"
    (row,) = [line for line in printed.out.splitlines() if "W3 per run" in line]
    assert row.rstrip(" |").endswith(verdict)
