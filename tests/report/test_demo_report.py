"""``trio-agent demo`` writes its run's report next to its transcript and says, just
before the transcript's line, how to open it; the page loads clean in the browser with
the run's timeline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from tests.kit.browser import load
from tests.report.pages import page_data
from trio_agent import load_transcript
from trio_agent._core import Message, from_jsonable

if TYPE_CHECKING:
    from playwright.sync_api import Browser


def test_the_demo_ends_by_telling_how_to_open_its_report(browser: Browser, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "README.md").write_text("# Widget\n\nA <widget> factory.\n")
    transcript = tmp_path / "demo.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "trio_agent.cli", "demo", "--transcript", str(transcript)],
        cwd=folder,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    *_, line, report_line = done.stdout.rstrip("\n").split("\n")
    assert line == f"transcript: {transcript}"
    assert report_line.startswith("report: open file://")
    assert report_line.endswith(" in a browser (the run's timeline)")
    url = report_line.removeprefix("report: open ").split(" ")[0]
    page_path = Path(unquote(urlparse(url).path))
    assert page_path == transcript.with_suffix(".html")
    (data,) = page_data(page_path.read_text(encoding="utf-8"))["transcripts"]
    loaded = load_transcript(transcript)
    assert tuple(from_jsonable(m, Message) for m in data["messages"]) == loaded.messages
    page = load(browser, page_path)
    try:
        page.check_clean()
        calls = sum(len(getattr(m, "tool_calls", ())) for m in loaded.messages)
        replies = sum(m.role == "assistant" for m in loaded.messages)
        assert page.page.locator("rect.bar").count() == calls + replies
    finally:
        page.page.context.close()
