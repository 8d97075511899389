"""The report pages' data, the escaping of the data block, and ``trio-agent report``
(what the page shows is checked in a real browser: test_browser.py)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from tests.kit.loop import call, ctx, prompt, reply, sleeper, tool_use, user
from tests.report.pages import page_data, record
from trio_agent import AssistantMessage, Text, Usage, load_transcript, write_transcript
from trio_agent._core import Message, from_jsonable
from trio_agent.cli import main
from trio_agent.report import Prices, transcript_report
from trio_agent.report._html import embed
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from pathlib import Path

NASTY = '</script><script>window.pwned=1</script> <!-- & " \u2028 \u2029 \ud800 >'


def test_the_data_block_holds_no_markup_and_reads_back() -> None:
    text = embed({"a": NASTY, NASTY: [NASTY]})
    assert not set(text) & set("<>&")
    assert text.isascii()
    assert json.loads(text) == {"a": NASTY, NASTY: [NASTY]}


async def test_a_report_embeds_the_messages_verdict_usage_and_timings(
    tmp_path: Path, autojump_clock: Any
) -> None:
    path = tmp_path / "t.jsonl"
    model = ScriptedModel(
        [
            tool_use(call("a", "slow", s=2), call("b", "fast", s=1), usage=Usage(input_tokens=10)),
            reply("done", usage=Usage(input_tokens=20, output_tokens=5, cache_read_tokens=7)),
        ]
    )
    await record(path, prompt(), ctx(sleeper("slow", 2), sleeper("fast", 1)), model)
    loaded = load_transcript(path)
    data = page_data(transcript_report([path], prices=Prices(input=1, output=2)))
    (t,) = data["transcripts"]
    assert tuple(from_jsonable(m, Message) for m in t["messages"]) == loaded.messages
    assert t["verdict"] == {"paired": True, "violations": []}
    assert [r["usage"]["input_tokens"] for r in t["requests"]] == [10, 20]
    assert t["total"]["input_tokens"] == 30
    assert t["total"]["cache_read_tokens"] == 7
    assert t["total"]["cost"] == pytest.approx((30 * 1 + 5 * 2) / 1e6)
    (run,) = t["runs"]
    kinds = [(b["kind"], b.get("id"), b["lane"]) for b in run["bars"]]
    assert kinds == [("request", None, 0), ("call", "a", 1), ("call", "b", 2), ("request", None, 0)]
    a = run["bars"][1]
    assert a["args"] == json.dumps({"s": 2}, indent=1)
    assert a["result"] == "a slept"
    (batch,) = run["batches"]
    assert batch["peak_concurrency"] == 2
    assert batch["overhead"] == pytest.approx(0, abs=1e-6)
    assert batch["speedup"] == pytest.approx(1.5)


def test_a_transcript_without_timings_or_pairing_still_renders(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    unpaired = AssistantMessage(content=(call("x"),), stop_reason="tool_use")
    write_transcript(path, [user(), unpaired, reply()], fsync=False)
    (t,) = page_data(transcript_report([path]))["transcripts"]
    assert t["runs"] == []
    assert not t["verdict"]["paired"]
    assert t["verdict"]["violations"]
    assert t["total"]["cost"] == 0.0  # no token was counted: nothing to pay, whatever the model


def test_without_prices_each_request_is_priced_by_its_model_from_the_table(
    tmp_path: Path,
) -> None:
    pytest.importorskip("genai_prices")
    path = tmp_path / "t.jsonl"
    known = Usage(input_tokens=1_000, output_tokens=200, cache_read_tokens=500)
    priced = AssistantMessage(
        content=(Text(text="a"),),
        stop_reason="stop",
        model="gpt-4.1",
        provider="openai",
        usage=known,
    )
    unknown = AssistantMessage(
        content=(Text(text="b"),),
        stop_reason="stop",
        model="no-such-model",
        provider="llama.cpp",
        usage=Usage(input_tokens=3),
    )
    write_transcript(path, [user(), priced], fsync=False)
    (t,) = page_data(transcript_report([path]))["transcripts"]
    assert t["priced"]
    expected = known.cost("gpt-4.1", "openai")
    assert expected is not None
    assert expected > 0
    assert t["requests"][0]["usage"]["cost"] == pytest.approx(expected)
    assert t["total"]["cost"] == pytest.approx(expected)
    # A request the table cannot price shows no cost, and the total is none: never a guess.
    write_transcript(path, [user(), priced, user(), unknown], fsync=False)
    (t,) = page_data(transcript_report([path]))["transcripts"]
    assert [r["usage"]["cost"] is None for r in t["requests"]] == [False, True]
    assert t["total"]["cost"] is None


def test_the_command_writes_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, out = tmp_path / "t.jsonl", tmp_path / "r.html"
    write_transcript(
        path,
        [user(NASTY), AssistantMessage(content=(Text(text=NASTY),), stop_reason="stop")],
        fsync=False,
    )
    assert main(["report", str(path), "-o", str(out), "--prices", "3,15"]) == 0
    assert capsys.readouterr().out == f"report: {out}\n"
    page = out.read_text(encoding="utf-8")
    assert "pwned" in page
    assert "</script><script>window" not in page
    (t,) = page_data(page)["transcripts"]
    assert t["messages"][0]["content"][0]["text"] == NASTY


def test_the_command_refuses_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not a transcript\n")
    assert main(["report", str(bad), "-o", str(tmp_path / "r.html")]) == 1
    assert "bad.jsonl:1" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "r.html")]) == 2
    with pytest.raises(SystemExit):
        main(["report", str(bad), "--prices", "1"])


def test_a_file_name_that_is_markup_stays_text(tmp_path: Path) -> None:
    # The page's <title> holds the file names: escaped there, like everything else.
    path = tmp_path / "<b onmouseover=alert(1)>&.jsonl"
    write_transcript(path, [user()], fsync=False)
    page = transcript_report([path])
    assert "<b onmouseover" not in page
    assert "<title>trio-agent report: &lt;b onmouseover=alert(1)&gt;&amp;.jsonl</title>" in page
    (t,) = page_data(page)["transcripts"]
    assert t["path"] == str(path)
