"""A fleet folder's summary page, in a real browser: how the tasks ended, histograms of
their wall times and steps, and the slowest and failed tasks linking to their own
reports, which load too; task ids that are markup or ``javascript:`` URLs stay text."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import trio

from tests.kit.browser import load, screenshot
from tests.report.pages import page_data
from trio_agent import load_transcript
from trio_agent.cli import main
from trio_agent.fleet import FleetTask, TaskSetup, demo_factory, demo_tasks, run_fleet
from trio_agent.report import fleet_report, is_fleet_folder
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from pathlib import Path

    from playwright.sync_api import Browser

NASTY_IDS = ("<script>window.pwned=1</script>", "javascript:window.pwned=2")


def _factory(task: FleetTask) -> TaskSetup:
    if task.id in NASTY_IDS:  # a model with nothing to say: the run ends on an error
        return TaskSetup(model=ScriptedModel([]))
    return demo_factory(task)


def _fleet(out: Path) -> None:
    tasks = [*demo_tasks(12, sleep=0.01), *(FleetTask(id=i, prompt="hi") for i in NASTY_IDS)]
    trio.run(lambda: run_fleet(tasks, _factory, out=out, progress=False, timings=True))


def test_the_summary_page_and_the_task_reports_it_links_to(
    browser: Browser, tmp_path: Path
) -> None:
    out = tmp_path / "fleet"
    _fleet(out)
    assert is_fleet_folder(out)
    summary = tmp_path / "summary.html"
    written = fleet_report(out, summary, slowest=5)
    assert written[0] == summary
    assert len(written) == 1 + 5 + 2  # the five slowest, the two failed
    page = load(browser, summary)
    try:
        page.check_clean()
        assert page.eval("() => window.pwned") is None
        # The end reasons: 12 stopped, 2 failed on a model error.
        reasons = page.eval("() => [...document.querySelectorAll('table')][0].innerText")
        assert "stop\t12" in reasons
        assert "error\t2" in reasons
        # Each histogram counts every task once.
        counts = page.eval(
            """() => [...document.querySelectorAll('svg.histogram')].map((s) =>
                [...s.querySelectorAll('rect.bar')].reduce((n, r) => n + +r.dataset.count, 0))"""
        )
        assert counts == [14, 14]
        # Links only to the task reports written, by plain relative paths.
        hrefs = page.eval(
            "() => [...document.querySelectorAll('a')].map((a) => a.getAttribute('href'))"
        )
        assert len(hrefs) == 7
        assert all(re.fullmatch(r"summary-tasks/[A-Za-z0-9._-]+\.html", h) for h in hrefs)
        texts = page.eval("() => [...document.querySelectorAll('a')].map((a) => a.textContent)")
        assert set(NASTY_IDS) <= set(texts)
        screenshot(page, "fleet-summary")
        # Following a failed task's link opens its report.
        page.page.click(f"text={NASTY_IDS[1]}")
        page.page.wait_for_selector("body[data-rendered=true]")
        assert page.page.url.startswith("file:")
        assert page.eval("() => window.pwned") is None
        assert page.page.locator(".msg").count() >= 2
        page.check_clean()
    finally:
        page.page.context.close()
    # Every task report loads, and a finished task's shows its request and call bars.
    for report in written[1:]:
        task_page = load(browser, report)
        try:
            task_page.check_clean()
            bars = task_page.page.locator("rect.bar").count()
            assert bars in (3, 1)  # lookup: request, call, request; failed: one request
        finally:
            task_page.page.context.close()


def test_the_commands_write_timings_and_a_fleet_summary(tmp_path: Path) -> None:
    out = tmp_path / "fleet"
    fleet = ["fleet", "--demo", "--demo-tasks", "6", "--out", str(out), "--no-progress"]
    assert main(fleet) == 0
    # trio-agent fleet records timings in every transcript.
    for transcript in (out / "transcripts").iterdir():
        assert load_transcript(transcript).markers_of("timings")
    assert main(["report", str(out), "-o", str(tmp_path / "s.html"), "--slowest", "3"]) == 0
    assert sorted(p.suffix for p in (tmp_path / "s-tasks").iterdir()) == [".html"] * 3
    data = page_data((tmp_path / "s.html").read_text(encoding="utf-8"))
    assert data["tasks"] == 6
    assert data["reasons"] == {"stop": 6}
