"""The benchmark suite still runs: every workload once at its smallest size.

No timing assertions (CI machines are noisy); the workloads assert their own results
(steps, reasons, batch statistics), so a broken loop or a broken benchmark fails here.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import pytest

from trio_agent import cli
from trio_agent._bench import suite
from trio_agent._bench._harness import (
    Progress,
    Row,
    measure_case,
    measure_in_fresh_process,
    rss_in_subprocess,
    tables,
)
from trio_agent._bench._peers import PEERS, missing_peers, peers_for
from trio_agent.cli import bench as _cmd_bench

if TYPE_CHECKING:
    from pathlib import Path

CASES = suite._cases()


@pytest.mark.parametrize("case", CASES, ids=[c.key for c in CASES])
def test_each_case_runs_at_its_smallest_size(case: suite.Case) -> None:
    size = case.quick_sizes[0]
    row = measure_case(case, size, repeats=1, memory=False)
    assert row.workload == case.workload
    assert row.n == size
    for who in ("ours", "floor"):
        assert len(row.samples[who]) == 1
        assert row.samples[who][0] > 0
        assert row.cpu[who][0] >= 0
    assert row.ratio is not None
    assert row.ratio > 0


def _in_this_process(size: int, inputs: Any) -> tuple[float, float]:
    raise AssertionError("measured in the harness's own process")


def test_w2_and_w3_measure_every_repeat_in_a_fresh_process() -> None:
    fresh = [c for c in CASES if c.fresh]
    assert {c.workload for c in fresh} == {"W2", "W3"}
    for case in fresh:
        # The children run the module's own contenders: nothing runs in this process
        # (these two would fail if it did), and each repeat reports what it saw.
        here = dataclasses.replace(case, ours=_in_this_process, floor=_in_this_process)
        row = measure_case(here, case.quick_sizes[0], repeats=1, memory=False)
        assert row.extra["method"] == "fresh process per repeat"
        for who in ("ours", "floor"):
            (wall,) = row.samples[who]
            assert wall > 0
            (faults,) = row.extra["minor_faults"][who]
            assert faults >= 0
            (collections,) = row.extra["gc_collections"][who]
            assert len(collections) == 3
        # The in-process way, asked for, runs them here.
        with pytest.raises(AssertionError, match="own process"):
            measure_case(here, case.quick_sizes[0], repeats=1, memory=False, in_process=True)


def test_a_failing_fresh_process_is_an_error_with_its_stderr() -> None:
    (case,) = [c for c in CASES if c.workload == "W3"]
    missing = dataclasses.replace(case, name="no such case")
    with pytest.raises(RuntimeError, match="KeyError"):
        measure_in_fresh_process(missing, "ours", 1)


def test_command_line_in_process_and_fresh(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    methods = {}
    for flag in ([], ["--in-process"]):
        out = tmp_path / "bench.json"
        command = ["bench", "--quick", "--only", "W3", "--no-memory", "--quiet", *flag]
        assert cli.main([*command, "--repeats", "1", "--json", str(out)]) == 0
        printed = capsys.readouterr().out
        data = json.loads(out.read_text())
        (row,) = data["rows"]
        methods[bool(flag)] = row.get("extra", {}).get("method")
        assert data["meta"]["in_process"] is bool(flag)
        assert ("every repeat in a fresh process" in printed) is not flag
        assert "load average" in printed
    assert methods == {False: "fresh process per repeat", True: None}


def test_every_workload_has_a_case_or_an_external_file() -> None:
    assert {c.workload for c in CASES} == {"W1", "W2", "W3", "W4"}
    assert set(suite.WORKLOADS) == set(_cmd_bench.WORKLOADS)


def test_peak_rss_in_a_subprocess() -> None:
    (case,) = [c for c in CASES if c.workload == "W3"]
    growth = rss_in_subprocess(case, "floor", case.quick_sizes[0])
    assert isinstance(growth, int)
    assert growth >= 0


def test_validation_workload_through_the_suite() -> None:
    report = suite.run_suite(only=["W5"], quick=True, peers=False)
    if any("bench_validation" in s for s in report.skipped):
        pytest.skip("trio_agent/_bench/bench_validation.py is not there")
    assert report.rows
    for row in report.rows:
        assert row.workload == "W5"
        assert row.ours is not None
        assert row.ours > 0


def test_command_line_quick_run_writes_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.json"
    code = cli.main(
        ["bench", "--quick", "--only", "W4", "--no-memory", "--quiet", "--json", str(out)]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "W4 streaming" in printed
    assert "| workload" in printed
    data = json.loads(out.read_text())
    (row,) = data["rows"]
    assert row["workload"] == "W4"
    assert row["size"] == "N=1,000"
    assert row["ours_s"] > 0
    assert row["floor_s"] > 0
    assert data["meta"]["quick"] is True


def test_command_line_rejects_an_unknown_workload(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "--only", "W9", "--quiet"]) == 2
    assert "unknown workload" in capsys.readouterr().err


def test_progress_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    suite.run_suite(only=["W4"], quick=True, repeats=1, memory=False, progress=Progress())
    captured = capsys.readouterr()
    assert "W4 streaming N=1,000" in captured.err
    assert captured.out == ""


def test_missing_peers_are_named() -> None:
    lines = missing_peers()
    for line in lines:
        assert "pip install -e '.[bench-peers]'" in line
    assert len(lines) <= len(PEERS)
    w4 = next(c for c in CASES if c.workload == "W4")
    assert peers_for(w4) == {}


def test_peer_table_shows_how_many_times_ours() -> None:
    row = Row(
        workload="W1",
        case="no consumer",
        size="T=200",
        n=200,
        unit="turn",
        samples={"ours": [0.01], "floor": [0.005], "langgraph": [0.5]},
    )
    text = tables([row])
    assert "2.00×" in text  # ours vs the floor
    assert "langgraph" in text
    assert "(50× ours)" in text


def test_unwritable_json_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "missing-folder" / "bench.json"
    code = cli.main(
        ["bench", "--quick", "--only", "W4", "--no-memory", "--quiet", "--json", str(out)]
    )
    assert code == 1
    assert "cannot write" in capsys.readouterr().err


def test_transcript_benchmark_rows() -> None:
    from trio_agent._bench import bench_transcript

    rows = bench_transcript.run(repeats=1)
    assert [r["case"] for r in rows] == ["load_transcript", "write_messages", "sink, fsync=False"]
    assert all(r["ours"] > 0 and r["floor"] > 0 for r in rows)


def test_the_fresh_process_study_runs_at_a_tiny_size(tmp_path: Path) -> None:
    from benchmarks import fresh_process

    out = tmp_path / "fresh.json"
    argv = ["--only", "W3", "--size", "5", "--rounds", "1", "--json", str(out)]
    assert fresh_process.main([*argv, "--variant", "fresh", "--variant", "bare-floor"]) == 0
    results = json.loads(out.read_text())
    assert [r["variant"] for r in results] == ["fresh", "bare-floor"]
    for result in results:
        for who in ("ours", "floor"):
            (child,) = result["raw"][who]
            assert child["wall"] > 0
            assert len(child["gc_counts"]) == 3
    # The floor without the package ran the suite's floor functions, not ours.
    assert results[1]["raw"]["floor"][0]["tracked"] < results[0]["raw"]["floor"][0]["tracked"]


def test_context_benchmark_rows() -> None:
    from trio_agent._bench import bench_context

    rows = bench_context.run(quick=True)
    assert len(rows) == 2 * len(bench_context.POLICIES)
    for row in rows:
        assert row["ours"] > 0
        assert row["floor"] > 0
