"""Any run the kit's strategies script, written with timings, renders in a real browser
without error, and the page's embedded data reads back to the transcript's messages.

Each example runs a drawn script (under the autojump clock), then writes its events to
a ``JsonlTranscript(timings=True)`` at the virtual instants they came, renders the
report and loads it in headless chromium (tests/kit/browser.py; skipped, saying why,
where there is none). The browser examples are a quarter of the profile's (at least 10).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import trio
from hypothesis import HealthCheck, given, settings

from tests.kit.browser import load
from trio_agent import AssistantMessage, JsonlTranscript, Message, load_transcript
from trio_agent._core import from_jsonable
from trio_agent.report import transcript_report
from trio_agent.testing import Script, scripts

if TYPE_CHECKING:
    from pathlib import Path

    from playwright.sync_api import Browser

EXAMPLES = max(10, settings().max_examples // 4)


async def _write_with_timings(script: Script, path: Path) -> None:
    """Run ``script``, then write its events at the (virtual) times they came."""
    with trio.fail_after(10_000):
        run = await script.run()
    run.check()
    origin = trio.current_time()
    # No fail_after from here: the autojump clock would jump to its deadline while a
    # worker thread writes.
    async with JsonlTranscript(path, fsync=False, timings=True) as transcript:
        for event, at in zip(run.events, run.event_times, strict=True):
            await trio.sleep_until(origin + at)
            await transcript.write_event(event)


@settings(
    max_examples=EXAMPLES,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(script=scripts())
async def test_every_scripted_run_renders_and_its_data_round_trips(
    autojump_clock: Any, browser: Browser, tmp_path: Path, script: Script
) -> None:
    path = tmp_path / "run.jsonl"
    path.unlink(missing_ok=True)
    await _write_with_timings(script, path)
    loaded_transcript = load_transcript(path)
    out = tmp_path / "report.html"
    out.write_text(transcript_report([path]), encoding="utf-8")
    page = load(browser, out)
    try:
        page.check_clean()
        embedded = json.loads(page.eval("() => JSON.stringify(DATA.transcripts[0].messages)"))
        messages = tuple(from_jsonable(m, Message) for m in embedded)
        assert messages == loaded_transcript.messages
        assert page.eval("() => document.querySelectorAll('.msg').length") == len(messages)
        # One bar per timed request and call.
        timed = 0
        for marker in loaded_transcript.markers_of("timings"):
            timed += 1 if "request" in marker.data else len(marker.data["calls"])
        assert page.eval("() => document.querySelectorAll('rect.bar').length") == timed
        # Every reply of the run was timed.
        replies = sum(isinstance(m, AssistantMessage) for m in messages)
        requests = [m for m in loaded_transcript.markers_of("timings") if "request" in m.data]
        assert len(requests) == replies
    finally:
        page.page.context.close()
