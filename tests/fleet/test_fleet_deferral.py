"""Fleet tasks whose calls wait for approval: recorded ``deferred`` (the waiting calls
in their result line), skipped while undecided, and resumed from their transcripts with
``decisions`` / ``trio-agent fleet --decisions FILE.jsonl``; bad decisions are refused
before anything runs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tests.kit.fleet import deferral_factory, result_lines
from trio_agent import Approve, Deny, check_transcript, load_transcript
from trio_agent.cli import main
from trio_agent.fleet import FleetTask, run_fleet

if TYPE_CHECKING:
    from pathlib import Path


def tasks(tmp_path: Path, n: int = 3) -> list[FleetTask]:
    ledger = str(tmp_path / "ledger")
    return [FleetTask(id=f"t{i}", prompt="go", metadata={"ledger": ledger}) for i in range(n)]


def ledger(tmp_path: Path) -> list[str]:
    path = tmp_path / "ledger"
    return sorted(path.read_text().splitlines()) if path.exists() else []


async def test_deferred_tasks_wait_and_decisions_resume_them(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = await run_fleet(tasks(tmp_path), deferral_factory, out=out, progress=False)
    assert first.deferred == 3
    assert first.still_failed == 0
    lines = result_lines(out)
    assert [(line["reason"], line["deferred"]) for line in lines] == [("deferred", ["s"])] * 3
    assert ledger(tmp_path) == ["look t0", "look t1", "look t2"]
    for line in lines:
        loaded = load_transcript(out / line["transcript"])
        check_transcript(loaded.messages, waiting=loaded.waiting)
        assert loaded.waiting == {"s", "k"}  # k ran: its result is held back

    # Undecided: nothing runs again.
    again = await run_fleet(tasks(tmp_path), deferral_factory, out=out, progress=False)
    assert (again.skipped, again.done, again.deferred) == (3, 0, 3)
    assert len(result_lines(out)) == 3

    # Bad decisions are refused before anything runs.
    with pytest.raises(ValueError, match="no deferred call has the id 'zz'") as err:
        await run_fleet(
            tasks(tmp_path),
            deferral_factory,
            out=out,
            progress=False,
            decisions={"t0": {"s": Approve(), "zz": Deny()}, "t9": {"s": Approve()}},
        )
    assert "task 't9': its last result is not 'deferred'" in str(err.value)
    assert len(result_lines(out)) == 3

    decided = await run_fleet(
        tasks(tmp_path),
        deferral_factory,
        out=out,
        progress=False,
        decisions={"t0": {"s": Approve()}, "t1": {"s": Deny("not now")}},
    )
    assert (decided.done, decided.resumed, decided.deferred) == (2, 2, 1)
    last = {line["id"]: line for line in result_lines(out)}
    assert last["t0"]["reason"] == "stop"
    assert last["t1"]["reason"] == "stop"
    assert last["t2"]["reason"] == "deferred"
    # Each call ran at most once: send only where approved, look once per task.
    assert ledger(tmp_path) == ["look t0", "look t1", "look t2", "send t0"]
    for task_id in ("t0", "t1"):
        loaded = load_transcript(out / last[task_id]["transcript"])
        check_transcript(loaded.messages)
        assert [m.kind for m in loaded.markers] == ["deferral", "decisions"]


def test_the_command_line_takes_a_decisions_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(
        "".join(
            json.dumps({"id": t.id, "prompt": "go", "metadata": dict(t.metadata)}) + "\n"
            for t in tasks(tmp_path, 2)
        )
    )
    base = [
        "fleet",
        str(tasks_file),
        "--factory",
        "tests.kit.fleet:deferral_factory",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert main(base) == 0
    shown = capsys.readouterr().out
    assert "2 task(s) wait for decisions" in shown

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task": "t0", "call": "s", "decision": "maybe"}\n')
    assert main([*base, "--decisions", str(bad)]) == 2
    assert "'decision' must be one of approve, deny, result" in capsys.readouterr().err
    missing = tmp_path / "missing.jsonl"
    missing.write_text('{"task": "t0", "call": "k", "decision": "approve"}\n')
    assert main([*base, "--decisions", str(missing)]) == 2
    assert "ran already" in capsys.readouterr().err

    decisions = tmp_path / "decisions.jsonl"
    decisions.write_text(
        '{"task": "t0", "call": "s", "decision": "approve"}\n'
        '{"task": "t1", "call": "s", "decision": "result", "content": "sent by hand"}\n'
    )
    assert main([*base, "--decisions", str(decisions)]) == 0
    shown = capsys.readouterr().out
    assert "wait for decisions" not in shown
    last = {line["id"]: line for line in result_lines(out)}
    assert [last[t]["reason"] for t in ("t0", "t1")] == ["stop", "stop"]
    assert ledger(tmp_path) == ["look t0", "look t1", "send t0"]
