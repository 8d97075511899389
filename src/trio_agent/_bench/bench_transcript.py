"""Transcripts on disk: write and load 10,000 messages as JSONL.

``python -m trio_agent._bench.bench_transcript`` prints, for one transcript of 10,000 messages
(a user prompt, then turns of an assistant message with text and three tool calls
followed by their three results):

- write through the run's sink (``JsonlTranscript.write_event`` per ``MessageEnd``: one
  worker-thread hop per line), without fsync, with one fsync per turn, and with the
  default fsync per line;
- write in one call (``write_messages``: one hop, one write);
- load (``load_transcript``: parse, structure and check every line);

each next to plain ``json.dumps``/``json.loads`` of the same data (the messages already
unstructured into dicts: no attrs, no cattrs, no thread), measured in the same run, and
the ratio of the two. Medians of a few repeats (one for the slow fsync rows); each
repeat writes a fresh file in a temporary folder (the system's temporary file system).
"""

from __future__ import annotations

import gc
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from trio_agent import (
    AssistantMessage,
    JsonlTranscript,
    Message,
    MessageEnd,
    Text,
    ToolCall,
    ToolResultMessage,
    TurnEnd,
    UserMessage,
    load_transcript,
)
from trio_agent._core import to_jsonable

if TYPE_CHECKING:
    from collections.abc import Callable

N = 10_000
REPEATS = 5


def transcript(n: int = N) -> list[Message]:
    """``n`` messages: a prompt, then turns of one assistant message and three results."""
    out: list[Message] = [UserMessage.text("Survey the repository and summarize it.")]
    turn = 0
    while len(out) < n:
        ids = [f"call_{turn}_{k}" for k in range(3)]
        out.append(
            AssistantMessage(
                content=(
                    Text(text=f"Step {turn}: reading three files to see how they fit together."),
                    *(
                        ToolCall(id=i, name="read", arguments={"path": f"src/m{turn}_{i}.py"})
                        for i in ids
                    ),
                ),
                stop_reason="tool_use",
            )
        )
        out.extend(
            ToolResultMessage(
                tool_call_id=i,
                tool_name="read",
                content=(Text(text=f"# module {i}\n" + "def f(x):\n    return x + 1\n" * 4),),
            )
            for i in ids
        )
        turn += 1
    return out[:n]


def _median(measure: Callable[[Path], float], folder: Path, repeats: int) -> float:
    """Median seconds of ``repeats`` runs, each on a new file in ``folder``."""
    times = []
    for _ in range(repeats):
        gc.collect()
        times.append(measure(folder / f"run{len(list(folder.iterdir()))}.jsonl"))
    return statistics.median(times)


def _write_sink(messages: list[Message], fsync: Any) -> Callable[[Path], float]:
    events: list[MessageEnd | TurnEnd] = []
    for m in messages:
        events.append(MessageEnd(message=m))
        if type(m) is ToolResultMessage and m.tool_call_id.endswith("_2"):
            events.append(TurnEnd(message=None))

    def measure(path: Path) -> float:
        async def run() -> float:
            async with JsonlTranscript(path, fsync=fsync) as t:
                start = time.perf_counter()
                for event in events:
                    await t.write_event(event)
                return time.perf_counter() - start

        return trio.run(run)

    return measure


def _write_bulk(messages: list[Message]) -> Callable[[Path], float]:
    def measure(path: Path) -> float:
        async def run() -> float:
            async with JsonlTranscript(path, fsync=False) as t:
                start = time.perf_counter()
                await t.write_messages(messages)
                return time.perf_counter() - start

        return trio.run(run)

    return measure


def _plain_write(dicts: list[Any]) -> Callable[[Path], float]:
    def measure(path: Path) -> float:
        start = time.perf_counter()
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join([json.dumps(d, separators=(",", ":")) + "\n" for d in dicts]))
        return time.perf_counter() - start

    return measure


def run(repeats: int = REPEATS) -> list[dict[str, Any]]:
    """Rows for the suite (``trio-agent bench``): loading, bulk writing and the
    ``MessageEnd`` sink without fsync, each against plain ``json`` on the same data."""
    messages = transcript()
    dicts = [to_jsonable(m, Message) for m in messages]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        plain_write = _median(_plain_write(dicts), folder, repeats)
        bulk = _median(_write_bulk(messages), folder, repeats)
        sink = _median(_write_sink(messages, False), folder, max(1, repeats // 3))
        path = folder / "last.jsonl"
        _write_bulk(messages)(path)
        plain_read = _median(_plain_load(path), folder, repeats)
        ours_read = _median(_our_load(path, messages), folder, repeats)
    common = {"size": f"N={N:,}", "n": N, "unit": "message"}
    return [
        {"case": "load_transcript", "ours": ours_read, "floor": plain_read, **common},
        {"case": "write_messages", "ours": bulk, "floor": plain_write, **common},
        {"case": "sink, fsync=False", "ours": sink, "floor": plain_write, **common},
    ]


def _plain_load(path: Path) -> Callable[[Path], float]:
    def measure(_: Path) -> float:
        start = time.perf_counter()
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
        [json.loads(line) for line in lines[1:] if line]
        return time.perf_counter() - start

    return measure


def _our_load(path: Path, messages: list[Message]) -> Callable[[Path], float]:
    def measure(_: Path) -> float:
        start = time.perf_counter()
        loaded = load_transcript(path)
        elapsed = time.perf_counter() - start
        assert loaded.messages == tuple(messages)
        return elapsed

    return measure


def main() -> None:
    messages = transcript()
    dicts = [to_jsonable(m, Message) for m in messages]
    rows: list[tuple[str, float, float | None]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        plain_write = _median(_plain_write(dicts), folder, REPEATS)
        rows.append(("write: plain json.dumps, one write", plain_write, None))
        for label, fsync, repeats in (
            ("write: sink per MessageEnd, fsync=False", False, 3),
            ('write: sink per MessageEnd, fsync="turn"', "turn", 1),
            ("write: sink per MessageEnd, fsync=True", True, 1),
        ):
            rows.append((label, _median(_write_sink(messages, fsync), folder, repeats), None))
        rows.append(
            (
                "write: write_messages, one call",
                _median(_write_bulk(messages), folder, REPEATS),
                None,
            )
        )
        path = folder / "last.jsonl"
        _write_bulk(messages)(path)
        size = path.stat().st_size

        plain_read = _median(_plain_load(path), folder, REPEATS)
        rows.append(("load: plain json.loads per line", plain_read, None))
        rows.append(
            ("load: load_transcript", _median(_our_load(path, messages), folder, REPEATS), None)
        )

    print(f"transcript: {N:,} messages, {size / 1e6:.1f} MB as JSONL")
    print(f"{'':44} {'total':>9} {'per msg':>9} {'vs plain json':>14}")
    for label, seconds, _ in rows:
        base = plain_read if label.startswith("load") else plain_write
        ratio = "" if "plain" in label else f"{seconds / base:.1f}×"
        print(f"{label:44} {seconds * 1e3:7.1f} ms {seconds / N * 1e6:6.1f} µs {ratio:>14}")


if __name__ == "__main__":
    main()
