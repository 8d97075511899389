"""The report pages in a real browser (headless chromium, see tests/kit/browser.py):
each loads from its file URL with no console error and no request off the page, draws
one bar per model request and tool call, overlaps the bars of a batch exactly when its
calls ran at once, shows a call's arguments and result on hover, and runs none of the
markup a transcript holds. Each keeps a screenshot under test-artifacts/browser/."""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING, Any

import trio
import trio.testing

from tests.kit.browser import Loaded, load, screenshot
from tests.kit.loop import call, ctx, make_tool, prompt, reply, tool_use, user
from tests.report.pages import record
from trio_agent import (
    AssistantMessage,
    LoopConfig,
    Text,
    Thinking,
    ToolCall,
    ToolResultMessage,
    Usage,
    load_transcript,
    write_transcript,
)
from trio_agent.report import Prices, transcript_report
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from playwright.sync_api import Browser

    from trio_agent import Context, Model, Tool, ToolContext


def _record(path: Path, context: Context, model: Model, config: LoopConfig | None = None) -> None:
    """One run written with timings, under an autojump clock (the tools' sleeps are
    virtual seconds, so the recorded times are exact)."""
    trio.run(
        record,
        path,
        prompt(),
        context,
        model,
        config,
        clock=trio.testing.MockClock(autojump_threshold=0),
    )


def _bars(loaded: Loaded) -> list[dict[str, Any]]:
    """Every bar drawn: its kind, turn, call id, status, left and right edge on screen,
    and the index of its transcript's section."""
    return loaded.eval(
        """() => [...document.querySelectorAll('rect.bar')].map((r) => {
            const box = r.getBoundingClientRect();
            return {kind: r.dataset.kind, turn: r.dataset.turn, id: r.dataset.id || null,
                    status: r.dataset.status, left: box.left, right: box.right,
                    section: r.closest('section.transcript').dataset.index};
        })"""
    )


def _timed(name: str, ran: dict[str, tuple[float, float]], *, timeout: float | None = None) -> Tool:
    """A tool that sleeps ``args['s']`` seconds and notes, itself, when it ran (also when
    it is cancelled): what the timeline must show."""

    async def execute(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
        start = trio.current_time()
        try:
            await trio.sleep(float(args["s"]))
        finally:
            ran[call.id] = (start, trio.current_time())
        return f"{call.id} slept"

    return make_tool(name, execute, timeout=timeout)


def test_the_timeline_draws_each_request_and_call_and_overlaps_what_ran_at_once(
    browser: Browser, tmp_path: Path
) -> None:
    # What each tool saw of its own run, per transcript: the truth the bars must show.
    ran: list[dict[str, tuple[float, float]]] = [{}, {}]
    path = tmp_path / "run.jsonl"
    tools = (_timed("slow", ran[0]), _timed("fast", ran[0]), _timed("hang", ran[0], timeout=1))
    model = ScriptedModel(
        [
            # Turn 0: three calls at once; b and c overlap a, and each other.
            tool_use(call("a", "slow", s=2), call("b", "fast", s=1), call("c", "fast", s=0.5)),
            # Turn 1: two calls at once.
            tool_use(call("d", "fast", s=1), call("e", "fast", s=1)),
            # Turn 2: a call that times out and one to a tool that does not exist.
            tool_use(call("f", "hang", s=3), call("g", "missing")),
            reply("done", usage=Usage(input_tokens=12, output_tokens=3)),
        ]
    )
    _record(path, ctx(*tools), model)
    # The same two calls with one slot (max_concurrency=1): one after the other, though
    # both enter the batch (ToolExecutionStart) at once.
    serial_path = tmp_path / "serial.jsonl"
    serial = ScriptedModel([tool_use(call("d", "fast", s=1), call("e", "fast", s=1)), reply()])
    _record(serial_path, ctx(_timed("fast", ran[1])), serial, LoopConfig(max_concurrency=1))
    out = tmp_path / "report.html"
    out.write_text(transcript_report([path, serial_path], prices=Prices(input=3, output=15)))
    loaded = load(browser, out)
    try:
        loaded.check_clean()
        bars = _bars(loaded)
        # One bar per request and per call of the transcripts.
        expected = 0
        turn_of: dict[str, int] = {}
        for i, p in enumerate((path, serial_path)):
            t = load_transcript(p)
            replies = [m for m in t.messages if isinstance(m, AssistantMessage)]
            expected += len(replies) + sum(len(m.tool_calls) for m in replies)
            for turn, m in enumerate(replies):
                turn_of.update({f"{i}:{c.id}": turn for c in m.tool_calls})
        assert len(bars) == expected
        # Bars of one batch overlap on screen exactly when the tools ran at once.
        calls = {f"{b['section']}:{b['id']}": b for b in bars if b["kind"] == "call"}
        assert set(calls) == set(turn_of)
        truth = {f"{i}:{k}": v for i, r in enumerate(ran) for k, v in r.items()}
        assert set(truth) == set(calls) - {"0:g"}  # g never ran
        pairs = {True: 0, False: 0}
        for x, y in itertools.combinations(sorted(calls), 2):
            if x[0] != y[0] or turn_of[x] != turn_of[y]:
                continue  # not one batch
            ran_together = x in truth and y in truth
            if ran_together:
                (s1, e1), (s2, e2) = truth[x], truth[y]
                ran_together = s1 < e2 and s2 < e1
            drawn_together = (
                calls[x]["left"] < calls[y]["right"] and calls[y]["left"] < calls[x]["right"]
            )
            assert drawn_together == ran_together, (x, y)
            pairs[ran_together] += 1
        assert pairs[True] == 4  # a-b, a-c, b-c; d-e
        assert pairs[False] == 2  # d-e with one slot; f-g (g never ran)
        # The time-out and the refused call are coloured as such.
        status = {k: calls[k]["status"] for k in ("0:f", "0:g")}
        assert status == {"0:f": "timed_out", "0:g": "not_found"}
        classes = loaded.eval(
            "() => document.querySelector(\"rect[data-id='f']\").getAttribute('class')"
        )
        assert "timed_out" in classes
        # Hovering a call shows its arguments and result.
        loaded.page.hover("rect[data-id='a']")
        tip = loaded.page.locator("#tip")
        assert tip.is_visible()
        assert '"s": 2' in tip.inner_text()
        assert "a slept" in tip.inner_text()
        # The verdict, the usage total and the cost.
        assert loaded.page.locator(".verdict.ok").count() == 2
        assert "$0.0001" in loaded.page.locator("tr.total").first.inner_text()
        screenshot(loaded, "transcript-report")
        loaded.check_clean()
    finally:
        loaded.page.context.close()


def test_a_transcript_without_timings_renders_without_a_timeline(
    browser: Browser, tmp_path: Path
) -> None:
    path = tmp_path / "t.jsonl"
    write_transcript(path, [user(), reply("hello")], fsync=False)
    out = tmp_path / "r.html"
    out.write_text(transcript_report([path]))
    loaded = load(browser, out)
    try:
        loaded.check_clean()
        assert loaded.page.locator("rect.bar").count() == 0
        assert loaded.page.locator(".no-timings").count() == 1
        assert loaded.page.locator(".msg").count() == 2
    finally:
        loaded.page.context.close()


PAYLOADS = (
    "<script>window.pwned = 'script'</script>",
    "</script><script>window.pwned = 'end of the data block'</script>",
    "<img src=x onerror=\"window.pwned = 'img'\">",
    "</textarea><svg onload=\"window.pwned = 'svg'\">",
    '" onmouseover="window.pwned = \'quote\'" x="',
    "javascript:window.pwned = 'url'",
    "<!-- \u2028 \u2029 & &amp; ]]>",
)


def _nasty_transcript(path: Path) -> str:
    text = "\n".join(PAYLOADS)
    first = ToolCall(id=PAYLOADS[1], name=PAYLOADS[2], arguments={"path": PAYLOADS[5], "x": text})
    reply_ = AssistantMessage(
        content=(Thinking(thinking=text), Text(text=text), first),
        stop_reason="tool_use",
        model=PAYLOADS[0],
    )
    result = ToolResultMessage(
        tool_call_id=first.id, tool_name=first.name, content=(Text(text=text),), is_error=True
    )
    last = AssistantMessage(
        content=(Text(text=text),), stop_reason="error", error_message=PAYLOADS[3]
    )
    messages = [user(text), reply_, result, last]
    # Timings too, so the payloads reach the timeline's tooltips as well.
    run = {"run": 1.0, "turn": 0}
    markers = [
        {"at": 2, "data": {**run, "request": {"start": 0, "first_token": 0.1, "end": 0.2}}},
        {
            "at": 3,
            "data": {
                **run,
                "calls": [
                    {
                        "id": first.id,
                        "name": first.name,
                        "start": 0.2,
                        "end": 0.5,
                        "outcome": "error",
                        "is_error": True,
                        "waited": 0,
                    }
                ],
                "stats": {
                    "wall_time": 0.3,
                    "critical_path": 0.3,
                    "total_call_time": 0.3,
                    "peak_concurrency": 1,
                    "waited_on_limit": 0,
                },
            },
        },
    ]
    from trio_agent import Marker

    write_transcript(
        path,
        messages,
        markers=[Marker(kind="timings", data=m["data"], at=m["at"]) for m in markers],
        fsync=False,
    )
    return text


def test_no_markup_of_a_transcript_runs(browser: Browser, tmp_path: Path) -> None:
    path = tmp_path / "nasty.jsonl"
    text = _nasty_transcript(path)
    out = tmp_path / "r.html"
    out.write_text(transcript_report([path]))
    loaded = load(browser, out)
    try:
        # Hover and click everything: no handler a payload could have added runs.
        for selector in ("rect.bar", "summary", ".msg"):
            for i in range(loaded.page.locator(selector).count()):
                item = loaded.page.locator(selector).nth(i)
                item.hover()
                item.click()
        assert loaded.eval("() => window.pwned") is None
        assert (
            loaded.eval("() => document.querySelectorAll('img, iframe, textarea, a[href]').length")
            == 0
        )
        # Exactly our two scripts: the data block and the page's own.
        assert loaded.eval("() => document.scripts.length") == 2
        # The payloads are on the page as text, whole.
        body = loaded.eval("() => document.body.textContent")
        for payload in PAYLOADS:
            assert payload.strip() in body
        pre = loaded.eval("() => document.querySelector('.msg.user pre').textContent")
        assert pre == text
        data = loaded.eval("() => DATA.transcripts[0].messages[0].content[0].text")
        assert data == text
        loaded.page.hover("rect.bar.call")
        assert PAYLOADS[5] in loaded.page.locator("#tip").inner_text()
        screenshot(loaded, "escaping")
        loaded.check_clean()
        assert json.loads(loaded.eval("() => JSON.stringify(DATA)"))["transcripts"][0][
            "path"
        ] == str(path)
    finally:
        loaded.page.context.close()


def test_interrupted_and_aborted_calls_are_marked(browser: Browser, tmp_path: Path) -> None:
    # Real clock: an interrupt cuts the first batch (its calls skipped), then an abort
    # stops the second (its call aborted).
    path = tmp_path / "t.jsonl"
    model = ScriptedModel(
        [
            tool_use(call("a", "slow", s=10), call("b", "slow", s=10)),
            tool_use(call("c", "slow", s=10)),
            reply(),
        ]
    )

    async def main() -> None:
        from trio_agent import JsonlTranscript, open_agent_loop

        with trio.fail_after(30):
            async with (
                JsonlTranscript(path, fsync=False, timings=True) as transcript,
                open_agent_loop(prompt(), ctx(_timed("slow", {})), model) as run,
            ):
                started = 0
                async for event in run.events:
                    await transcript.write_event(event)
                    if event.type == "tool_execution_start":
                        started += 1
                        await trio.sleep(0.05)
                        if started == 2:
                            assert run.interrupt()
                        elif started == 3:
                            run.abort("stop")

    trio.run(main)
    out = tmp_path / "r.html"
    out.write_text(transcript_report([path]))
    loaded = load(browser, out)
    try:
        loaded.check_clean()
        status = {b["id"]: b["status"] for b in _bars(loaded) if b["kind"] == "call"}
        assert status == {"a": "skipped", "b": "skipped", "c": "aborted"}
        marks = loaded.eval(
            "() => [...document.querySelectorAll('text.mark')].map((t) => t.textContent)"
        )
        assert sorted(marks) == ["✕ aborted", "✕ skipped", "✕ skipped"]
        screenshot(loaded, "interrupted-and-aborted")
    finally:
        loaded.page.context.close()
