"""How ``trio-agent demo`` shows a run: live text for a terminal, or JSON lines.

:class:`Output` wraps the stream written to and turns a closed pipe
(``trio-agent demo --json | head``) into a quiet flag instead of an exception.
:class:`LiveView` prints the reply as it streams, each tool call while it runs (a
spinner on a terminal, a progress line otherwise), its result summary and time, the
batch statistics of each turn, and a last summary.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any, TextIO

import trio

from .._core import (
    AssistantMessage,
    ToolResultMessage,
    UserMessage,
    event_to_json,
    json_text,
    to_jsonable,
)
from .._core import events as ev

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["JsonView", "LiveView", "Output"]

SPIN_EVERY = 0.08
"""Seconds between two spinner frames."""
MAX_PROGRESS_SHOWN = 8
"""Progress lines shown per call; the rest are summed up."""


class Output:
    """A text stream that notes a broken pipe instead of raising.

    After the reader went away, :attr:`broken` is set, the stream's descriptor points
    to ``/dev/null`` (so the interpreter's last flush cannot fail either), and further
    writes are dropped.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.broken = False

    def write(self, text: str) -> None:
        if self.broken:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except BrokenPipeError:
            self.broken = True
            self._silence()

    def _silence(self) -> None:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):  # no real descriptor (a test's StringIO)
            pass

    def line(self, text: str = "") -> None:
        self.write(text + "\n")


def _ms(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds:.2f} s"


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def describe_call(name: str, args: Mapping[str, Any]) -> str:
    """A short human label for a tool call."""
    if name in ("read", "write", "edit", "ls"):
        label = f"{name} {args.get('path', '.')}"
        if name == "read":
            offset, limit = args.get("offset"), args.get("limit")
            if offset is not None and limit is not None:
                label += f" (lines {offset}-{offset + limit - 1})"
            elif offset is not None:
                label += f" (from line {offset})"
            elif limit is not None:
                label += f" (first {limit} lines)"
        return label
    if name == "find":
        return f"find {args.get('pattern', '')}"
    if name == "grep":
        return f"grep /{args.get('pattern', '')}/ in {args.get('path', '.')}"
    if name == "bash":
        return f"bash $ {_cut(str(args.get('command', '')), 60)}"
    return f"{name} {_cut(json.dumps(dict(args), ensure_ascii=False), 60)}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def summarize(result: ToolResultMessage) -> str:
    """What a result says, in a few words (from its details when it has them)."""
    d = result.details if isinstance(result.details, dict) else {}
    name = result.tool_name
    if result.is_error or not d:
        lines = [ln for ln in result.text.split("\n") if ln.strip()]
        return _cut(lines[-1] if result.is_error and lines else (lines[0] if lines else ""), 70)
    if name == "read":
        shown = d.get("end", 0) - d.get("start", 1) + 1
        total = d.get("total_lines", 0)
        return _plural(total, "line") if shown >= total else f"lines 1-{shown} of {total}"
    if name == "ls":
        dirs, files = len(d.get("dirs", ())), len(d.get("files", ()))
        return f"{_plural(dirs, 'folder')}, {_plural(files, 'file')}"
    if name == "find":
        return _plural(d.get("count", 0), "path")
    if name == "grep":
        return (
            f"{_plural(d.get('matches', 0), 'match').replace('matchs', 'matches')} in "
            f"{_plural(d.get('files_searched', 0), 'file')}"
        )
    if name == "bash":
        return f"exit {d.get('exit_code', 0)}, {_plural(d.get('lines', 0), 'line')} of output"
    return _cut(result.text, 70)


class _Style:
    def __init__(self, color: bool, unicode: bool) -> None:
        self.color = color
        self.ok = "✓" if unicode else "+"
        self.bad = "✗" if unicode else "x"
        self.run = "…" if unicode else "..."
        self.bar = "│" if unicode else "|"
        self.arrow = "›" if unicode else ">"
        self.frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏" if unicode else "-\\|/"

    def _sgr(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def dim(self, text: str) -> str:
        return self._sgr("2", text)

    def bold(self, text: str) -> str:
        return self._sgr("1", text)

    def green(self, text: str) -> str:
        return self._sgr("32", text)

    def red(self, text: str) -> str:
        return self._sgr("31", text)

    def cyan(self, text: str) -> str:
        return self._sgr("36", text)


class LiveView:
    """Renders loop events for a person watching a terminal (or reading a log).

    Args:
        out: where to write.
        live: a terminal: animate a spinner line while tools run (otherwise each call
            gets a progress line when it starts).
        color: use ANSI colours.
        errors: where a model's or a transport's error goes (default: ``out``). An
            abort is not an error: it is shown on ``out`` as ``aborted``.
    """

    def __init__(
        self, out: Output, *, live: bool, color: bool, errors: Output | None = None
    ) -> None:
        self.out = out
        self.errors = errors
        self.live = live
        # A stream without an encoding holds str (a StringIO): any character goes.
        encoding = getattr(out.stream, "encoding", None)
        unicode = encoding is None or encoding.lower().replace("-", "").startswith("utf")
        self.s = _Style(color, unicode=unicode)
        self._running: dict[str, tuple[str, float]] = {}  # call id -> label, start
        self._progress: dict[str, int] = {}
        self._status_shown = False
        self._frame = 0
        self._in_text = False
        self._indent = False
        # A question waits for a line typed at the terminal: no status line is drawn
        # below it, so the answer's echo does not land after the spinner's text.
        self.asking = False

    # --- lines and the status line ----------------------------------------------------

    def _clear_status(self) -> None:
        if self._status_shown:
            self.out.write("\r\x1b[K")
            self._status_shown = False

    def _draw_status(self) -> None:
        if not self.live or not self._running or self.asking:
            return
        now = trio.current_time()
        frame = self.s.frames[self._frame % len(self.s.frames)]
        oldest = min(start for _, start in self._running.values())
        labels = " · ".join(label for label, _ in self._running.values())
        text = f"  {frame} {_cut(labels, 70)}  {now - oldest:.1f}s"
        self.out.write("\r\x1b[K" + self.s.cyan(text))
        self._status_shown = True

    def line(self, text: str = "") -> None:
        """Write a line of its own: a reply still streaming is broken off first."""
        self._clear_status()
        if self._in_text:
            self.out.line()
            self._in_text = False
        self.out.line(text)
        self._draw_status()

    async def spin(self) -> None:
        """Redraw the spinner line while calls run; runs until cancelled."""
        while True:
            await trio.sleep(SPIN_EVERY)
            if self._running and self.live:
                self._frame += 1
                self._draw_status()

    def _write_text(self, delta: str) -> None:
        # Continuation lines of a reply are indented by two spaces; blank ones stay empty.
        for i, piece in enumerate(delta.split("\n")):
            if i:
                self.out.write("\n")
                self._indent = True
            if piece:
                if self._indent:
                    self.out.write("  ")
                    self._indent = False
                self.out.write(piece)

    # --- the run ----------------------------------------------------------------------

    def header(self, folder: str, tools: Sequence[str], bash: bool) -> None:
        s = self.s
        self.line(
            s.bold("trio-agent demo") + s.dim(" · a scripted model, offline: no key, no network")
        )
        self.line(s.dim(f"folder: {folder}"))
        self.line(s.dim(f"tools:  {', '.join(tools)} (read-only{'' if bash else ', no bash'})"))

    def show(self, event: ev.AgentEvent) -> None:
        s = self.s
        kind = type(event)
        if kind is ev.MessageUpdate:
            assert isinstance(event, ev.MessageUpdate)
            inner = event.event
            if type(inner) is ev.TextDelta:
                if not self._in_text:
                    self.line()
                    self.out.write(s.bold(f"assistant {s.arrow} "))
                    self._in_text = True
                    self._indent = False
                self._write_text(inner.delta)
        elif kind is ev.MessageEnd:
            assert isinstance(event, ev.MessageEnd)
            m = event.message
            if type(m) is AssistantMessage:
                if self._in_text:
                    self.out.line()
                    self._in_text = False
                if m.stop_reason == "aborted":
                    self.line(s.dim("  (reply aborted)"))
                elif m.error_message:
                    text = f"model error ({m.stop_reason}): {m.error_message}"
                    if self.errors is None:
                        self.line(s.red(f"  {text}"))
                    else:
                        self.errors.line(text)
            elif type(m) is UserMessage:
                text = "".join(getattr(b, "text", "") for b in m.content)
                self.line()
                self.line(s.bold(f"you {s.arrow} ") + text)
        elif kind is ev.ToolExecutionStart:
            assert isinstance(event, ev.ToolExecutionStart)
            label = describe_call(event.tool_name, event.args)
            self._running[event.call_id] = (label, trio.current_time())
            if self.live:
                self._clear_status()
                self._draw_status()
            else:
                self.line(s.dim(f"  {s.run} {label}"))
        elif kind is ev.ToolExecutionUpdate:
            assert isinstance(event, ev.ToolExecutionUpdate)
            # One update may carry several lines (bash merges lines between reports).
            for text in str(event.partial).split("\n"):
                n = self._progress.get(event.call_id, 0) + 1
                self._progress[event.call_id] = n
                if n <= MAX_PROGRESS_SHOWN:
                    self.line(s.dim(f"    {s.bar} {_cut(text, 100)}"))
        elif kind is ev.ToolExecutionEnd:
            assert isinstance(event, ev.ToolExecutionEnd)
            label, start = self._running.pop(event.call_id, (event.tool_name, trio.current_time()))
            extra = self._progress.pop(event.call_id, 0) - MAX_PROGRESS_SHOWN
            if extra > 0:
                self.line(s.dim(f"    {s.bar} … and {_plural(extra, 'more line')}"))
            took = s.dim(f" · {_ms(trio.current_time() - start)}")
            summary = summarize(event.result)
            if event.is_error:
                self.line(f"  {s.red(s.bad)} {label} — {s.red(event.outcome)}: {summary}{took}")
            else:
                self.line(f"  {s.green(s.ok)} {label} — {summary}{took}")
        elif kind is ev.TurnEnd:
            assert isinstance(event, ev.TurnEnd)
            if event.tool_results:
                self.line(s.dim(f"  {batch_line(event.stats)}"))
        elif kind is ev.ContextCompacted:
            assert isinstance(event, ev.ContextCompacted)
            why = " after the model refused a request as too long" * (event.reason == "overflow")
            self.line(
                s.dim(
                    f"  context compacted ({event.policy}){why}: about "
                    f"{event.tokens_before:,} → {event.tokens_after:,} tokens"
                )
            )

    def footer(self, reason: str, steps: int, messages: int, seconds: float) -> None:
        self.line()
        self.line(
            self.s.dim(
                f"done · {reason} · {_plural(steps, 'model request')} · "
                f"{_plural(messages, 'message')} · {_ms(seconds)}"
            )
        )


def batch_line(stats: ev.TurnStats) -> str:
    """One line of a batch's statistics."""
    n = len(stats.calls)
    text = (
        f"batch: {_plural(n, 'call')} · wall {_ms(stats.wall_time)} · critical path "
        f"{_ms(stats.critical_path)} · sum of calls {_ms(stats.total_call_time)} · peak "
        f"concurrency {stats.peak_concurrency}"
    )
    if n > 1 and stats.wall_time > 0 and stats.total_call_time > 1.05 * stats.wall_time:
        speedup = stats.total_call_time / stats.wall_time
        text += f" · {speedup:.1f}× faster than one by one"
    return text


class JsonView:
    """Prints each event as one JSON line.

    A ``message_update`` line carries only its stream event (``{"type":
    "message_update", "event": {"type": "text_delta", ...}}``), not the whole partial
    message again: the message is complete in ``message_end``. Every other event is
    written as :func:`~trio_agent.dumps` would write it.
    """

    def __init__(self, out: Output) -> None:
        self.out = out

    def show(self, event: ev.AgentEvent) -> None:
        if type(event) is ev.MessageUpdate:
            inner = to_jsonable(event.event, ev.AssistantEvent)
            self.out.line(json_text({"type": event.type, "event": inner}))
        else:
            self.out.line(event_to_json(event))

    def transcript(self, path: object) -> None:
        """The last line: where the transcript was written."""
        self.out.line(json_text({"type": "transcript", "path": str(path)}))


def wants_color(stream: TextIO) -> bool:
    """ANSI colours only for a terminal, and never when ``NO_COLOR`` is set."""
    return (
        stream.isatty()
        and "NO_COLOR" not in os.environ
        and os.environ.get("TERM") != "dumb"
        and sys.platform != "win32"
    )
