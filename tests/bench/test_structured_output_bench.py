"""``benchmarks/bench_structured_output.py`` runs at its smallest size, and checks what it
times (the three structurings agree, each run ends with the value)."""

from __future__ import annotations

from benchmarks import bench_structured_output


def test_the_structured_output_benchmark_runs() -> None:
    result = bench_structured_output.measure(repeats=1, n=3, runs=2)
    assert set(result) == {
        "cattrs.structure alone",
        "check (tool mode)",
        "check_text (text modes)",
        "run, tool mode",
        "run, prompted mode",
        "run without",
    }
    assert all(seconds > 0 for seconds in result.values())
