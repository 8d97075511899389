"""``trio-agent bench --html``: the benchmark results as charts, in a real browser —
one bar per contender, workload and size, each the ratio of its median to the floor's
as the table and the JSON have it; peers beside ours."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tests.kit.browser import load, screenshot
from trio_agent import cli
from trio_agent._bench._harness import Row
from trio_agent.report import bench_report

if TYPE_CHECKING:
    from pathlib import Path

    from playwright.sync_api import Browser


def test_the_command_writes_the_charts_of_what_it_measured(
    browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_path, page_path = tmp_path / "bench.json", tmp_path / "bench.html"
    command = ["bench", "--quick", "--only", "W1", "--no-memory", "--quiet", "--repeats", "1"]
    assert cli.main([*command, "--json", str(data_path), "--html", str(page_path)]) == 0
    assert f"HTML written to {page_path}" in capsys.readouterr().out
    rows = json.loads(data_path.read_text())["rows"]
    assert rows
    page = load(browser, page_path)
    try:
        page.check_clean()
        drawn = page.eval(
            "() => [...document.querySelectorAll('rect.bar')].map((r) => +r.dataset.ratio)"
        )
        assert drawn == pytest.approx([r["ours_s"] / r["floor_s"] for r in rows])
        assert drawn == pytest.approx([r["ratio"] for r in rows])
        screenshot(page, "bench-quick")
    finally:
        page.page.context.close()


def test_peers_are_drawn_beside_ours(browser: Browser, tmp_path: Path) -> None:
    def row(size: str, samples: dict[str, list[float]]) -> Row:
        return Row(workload="W2", case="wide batch", size=size, samples=samples)

    rows = [
        row("N=10", {"ours": [2.0], "floor": [1.0]}),
        row("N=10,000", {"ours": [3.0], "floor": [2.0], "langgraph": [8.0], "<b>x</b>": [4.0]}),
    ]
    page_path = tmp_path / "bench.html"
    results = {"meta": {"commit": "<i>abc</i>"}, "rows": [r.to_json() for r in rows], "skipped": []}
    page_path.write_text(bench_report(results))
    page = load(browser, page_path)
    try:
        page.check_clean()
        bars = page.eval(
            """() => [...document.querySelectorAll('rect.bar')].map((r) =>
                [r.getAttribute('class'), +r.dataset.ratio])"""
        )
        assert bars == [
            ["bar ours", 2.0],
            ["bar ours", 1.5],
            ["bar peer", 4.0],
            ["bar peer", 2.0],
        ]
        labels = page.eval("() => document.body.textContent")
        assert "<b>x</b> N=10,000" in labels
        assert "commit <i>abc</i>" in labels
        assert page.eval("() => document.querySelectorAll('b, i:not(.legend i)').length") == 0
        screenshot(page, "bench-peers")
    finally:
        page.page.context.close()


def test_html_does_not_apply_to_instruction_counts(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "--instructions", "--html", "x.html", "--quiet"]) == 2
    assert "--html does not apply" in capsys.readouterr().err
