"""The measuring harness every workload shares.

Theory of operation: a workload file describes one or more :class:`Case` s — the code we
measure (``ours``), a bare trio loop doing the same work with nursery + lists and nothing
else (``floor``), and optionally the same work on peer frameworks. The case's ``prepare``
builds the inputs of a size once (the scripted replies); each contender is a plain
function ``measure(size, inputs) -> (wall, cpu)`` that starts its own event loop
(``trio.run`` / ``asyncio.run``) and times only the workload itself with a
:class:`Stopwatch` inside that loop, so start-up and set-up never count.

:func:`measure_case` runs the contenders *interleaved* — one repeat of each in turn, the
order alternating between repeats — so that a noisy neighbour or a frequency change hits
every contender alike, and reports medians. Two ways:

- **In this process** (W1, W4): one untimed warm-up, then the heap that exists before the
  repeats (imported modules, prepared inputs) is frozen (``gc.freeze()``) so that full
  garbage collections walk only what the workload allocates, whatever else the process
  imported; ``gc.collect()`` before every repeat.
- **A fresh process per repeat** (cases with ``fresh=True``: W2 and W3, judged in wall
  time as an application's process sees it): every repeat of every contender is a new
  interpreter (:mod:`trio_agent._bench._fresh`) that imports, prepares the inputs and
  runs the workload once — no warm-up, no frozen heap, no collection beforehand, no
  memory mapped by an earlier repeat. What differs is above all the garbage collector:
  a ``gc.collect()`` just before a run moves where its full collections fall. In a
  fresh process ours pays one of W2's at the batch's peak and the floor does not, so
  W2 reads higher than in one long-lived process; W3 pays one full collection on both
  sides and reads lower. The measurements are in ``benchmarks/README.md``.

Peak memory is the growth of the peak RSS (``VmHWM``) of a *fresh subprocess* running one
repeat (see :mod:`trio_agent._bench._rss`): an in-process RSS never shrinks, so after the
first workload it would measure the allocator's history, not the workload.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

__all__ = [
    "FRESH",
    "Case",
    "FreshSample",
    "Progress",
    "Row",
    "Stopwatch",
    "Timing",
    "format_bytes",
    "format_seconds",
    "measure_case",
    "measure_in_fresh_process",
    "rss_in_subprocess",
    "tables",
]

Timing = tuple[float, float]
"""Seconds of one repeat: (wall time, CPU time of the process)."""

Measure = Callable[[int, Any], Timing]
"""Run one repeat at ``size`` with the case's prepared ``inputs``; time the workload."""


class Stopwatch:
    """Times a block by wall clock and by the process's CPU clock::

    with Stopwatch() as watch:
        ...
    return watch.timing
    """

    __slots__ = ("_cpu", "_wall", "timing")

    def __enter__(self) -> Stopwatch:
        self._cpu = time.process_time()
        self._wall = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._wall
        self.timing = (wall, time.process_time() - self._cpu)


def _no_inputs(size: int) -> Any:
    return None


@dataclass(frozen=True)
class Case:
    """One workload variant measured at several sizes.

    Attributes:
        workload: ``"W1"``... ``"W5"``.
        name: the variant (``"no consumer"``), or ``""``.
        size_label: the letter of the size (``"T"``, ``"N"``, ``"R"``).
        unit: what one size unit is (``"turn"``, ``"call"``...): costs are per unit.
        sizes / quick_sizes: sizes of a full run and of ``--quick``.
        ours / floor: the contenders.
        prepare: builds the inputs of one size (the model's scripts...) once, outside
            the timed region; every repeat of every contender gets them.
        module: the module defining the case (the RSS subprocess imports it).
        offset: seconds of the workload that are not overhead (W2's 10 ms sleep): the
            cost per unit is ``(time - offset) / size``.
        memory: measure peak RSS (in a fresh subprocess per contender and size).
        fresh: time every repeat in a fresh interpreter, as an application's process
            sees the workload (no warm-up, no frozen heap, no memory mapped before);
            see :func:`measure_in_fresh_process`.
        memory_per_unit: show memory per unit (W3: per run) instead of in total.
        peer_sizes: the sizes at which peers run (they are slow).
    """

    workload: str
    name: str
    size_label: str
    unit: str
    sizes: tuple[int, ...]
    quick_sizes: tuple[int, ...]
    ours: Measure
    floor: Measure
    module: str
    prepare: Callable[[int], Any] = _no_inputs
    offset: float = 0.0
    memory: bool = False
    memory_per_unit: bool = False
    peer_sizes: tuple[int, ...] = ()
    fresh: bool = False

    @property
    def key(self) -> str:
        return f"{self.workload}:{self.name}"


@dataclass
class Row:
    """The result of one case at one size (or a row handed over by another bench file).

    ``samples`` holds the seconds of every repeat per contender (``ours``, ``floor``, and
    peers by name); ``rss`` the peak RSS growth in bytes per contender.
    """

    workload: str
    case: str
    size: str
    n: int = 1
    unit: str = ""
    offset: float = 0.0
    samples: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)
    rss: dict[str, int | None] = field(default_factory=dict)
    memory_per_unit: bool = False
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def median(self, who: str) -> float | None:
        values = self.samples.get(who)
        return statistics.median(values) if values else None

    @property
    def ours(self) -> float | None:
        return self.median("ours")

    @property
    def floor(self) -> float | None:
        return self.median("floor")

    @property
    def ratio(self) -> float | None:
        ours, floor = self.ours, self.floor
        if ours is None or floor is None or floor <= 0:
            return None
        return ours / floor

    @property
    def cpu_ratio(self) -> float | None:
        """The ratio of CPU times (steadier than wall time on a busy machine)."""
        ours, floor = self.cpu.get("ours"), self.cpu.get("floor")
        if not ours or not floor:
            return None
        f = statistics.median(floor)
        return statistics.median(ours) / f if f > 0 else None

    def per_unit(self, who: str) -> float | None:
        """Seconds per unit, the fixed ``offset`` (a tool's sleep) taken out."""
        value = self.median(who)
        if value is None or self.n <= 0:
            return None
        return (value - self.offset) / self.n

    @property
    def peers(self) -> list[str]:
        return [k for k in self.samples if k not in ("ours", "floor")]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "workload": self.workload,
            "case": self.case,
            "size": self.size,
            "n": self.n,
            "unit": self.unit,
            "ours_s": self.ours,
            "floor_s": self.floor,
            "ratio": self.ratio,
            "cpu_ratio": self.cpu_ratio,
            "ours_per_unit_s": self.per_unit("ours"),
            "floor_per_unit_s": self.per_unit("floor"),
            "peak_rss_bytes": dict(self.rss),
            "samples_s": {k: list(v) for k, v in self.samples.items()},
            "cpu_samples_s": {k: list(v) for k, v in self.cpu.items()},
            "peers_s": {p: self.median(p) for p in self.peers},
        }
        if self.note:
            out["note"] = self.note
        if self.extra:
            out["extra"] = self.extra
        return out


class Progress:
    """Progress lines on stderr: rewritten in place on a terminal, one per case otherwise."""

    def __init__(self, stream: TextIO | None = None, *, enabled: bool = True) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._enabled = enabled
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._last_line = ""
        self._width = 0

    def __call__(self, message: str, *, detail: str = "") -> None:
        if not self._enabled:
            return
        if self._tty:
            text = f"{message} {detail}".rstrip()
            pad = max(0, self._width - len(text))
            self._stream.write(f"\r{text}{' ' * pad}")
            self._width = len(text)
            self._stream.flush()
        elif message != self._last_line:
            self._stream.write(message + "\n")
            self._stream.flush()
        self._last_line = message

    def line(self, message: str) -> None:
        """A line that stays (a skipped peer, a warning)."""
        if not self._enabled:
            return
        if self._tty and self._width:
            self._stream.write("\r" + " " * self._width + "\r")
            self._width = 0
        self._stream.write(message + "\n")
        self._stream.flush()
        self._last_line = ""

    def done(self) -> None:
        if self._enabled and self._tty and self._width:
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()
            self._width = 0


def size_text(label: str, size: int) -> str:
    return f"{label}={size:,}"


def measure_case(
    case: Case,
    size: int,
    *,
    repeats: int,
    peers: Mapping[str, Measure] | None = None,
    peer_repeats: int = 3,
    memory: bool = True,
    in_process: bool = False,
    progress: Progress | None = None,
) -> Row:
    """Measure ``case`` at ``size``: ``repeats`` interleaved repeats of each contender.

    A case with ``fresh=True`` runs every repeat of every contender in a new interpreter
    (:func:`measure_in_fresh_process`), unless ``in_process`` asks for the in-process
    way of the other cases (to compare the two). In this process, each contender runs
    once at the smallest quick size first (imports, caches), untimed, and the heap that
    exists before the repeats is frozen. Peers (slow) run only their first
    ``peer_repeats`` repeats.

    Raises:
        RuntimeError: a fresh process failed (its workload's own checks included).
    """
    progress = progress or Progress(enabled=False)
    contenders: dict[str, Measure] = {"ours": case.ours, "floor": case.floor}
    contenders.update(peers or {})
    title = f"{case.workload} {case.name} {size_text(case.size_label, size)}".replace("  ", " ")
    plan = _Plan(case, size, contenders, repeats, peer_repeats, title, progress)
    samples = _measure_here(plan) if in_process or not case.fresh else _measure_fresh(plan)
    rss: dict[str, int | None] = {}
    if memory and case.memory:
        for name in contenders:
            progress(title, detail=f"peak RSS {name}")
            rss[name] = rss_in_subprocess(case, name, size)
    return Row(
        workload=case.workload,
        case=case.name,
        size=size_text(case.size_label, size),
        n=size,
        unit=case.unit,
        offset=case.offset,
        samples=samples.wall,
        cpu=samples.cpu,
        rss=rss,
        memory_per_unit=case.memory_per_unit,
        extra=samples.extra,
    )


@dataclass(frozen=True)
class _Plan:
    """What :func:`measure_case` was asked to measure."""

    case: Case
    size: int
    contenders: Mapping[str, Measure]
    repeats: int
    peer_repeats: int
    title: str
    progress: Progress

    def rounds(self) -> Iterable[tuple[int, str]]:
        """(repeat, contender) in the order they run: the order alternates between
        repeats, so that no contender always runs right after another; peers only in
        their first ``peer_repeats`` repeats."""
        names = list(self.contenders)
        for r in range(self.repeats):
            for name in names if r % 2 == 0 else names[::-1]:
                if name in ("ours", "floor") or r < self.peer_repeats:
                    self.progress(self.title, detail=f"repeat {r + 1}/{self.repeats} {name}")
                    yield r, name


@dataclass
class _Samples:
    """Seconds of every repeat per contender, by wall clock and CPU clock; what else the
    method recorded (for the JSON)."""

    wall: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, name: str, wall: float, cpu: float) -> None:
        self.wall.setdefault(name, []).append(wall)
        self.cpu.setdefault(name, []).append(cpu)


def _measure_here(plan: _Plan) -> _Samples:
    case, size, progress = plan.case, plan.size, plan.progress
    warm = case.quick_sizes[0]
    warm_inputs = case.prepare(warm)
    for name, fn in plan.contenders.items():
        progress(plan.title, detail=f"warm-up {name}")
        fn(warm, warm_inputs)
    del warm_inputs
    progress(plan.title, detail="preparing")
    inputs = case.prepare(size)
    samples = _Samples()
    # What exists now — modules (ours, and any peer's), their import-time objects, the
    # prepared inputs — is not the workload: freeze it so that full collections walk
    # only what the repeats allocate. Otherwise every contender pays for whichever
    # libraries happen to be imported (a peer's import makes our full collections
    # slower too), and the figures depend on the order the suite ran in.
    gc.collect()
    gc.freeze()
    try:
        for _, name in plan.rounds():
            gc.collect()
            samples.add(name, *plan.contenders[name](size, inputs))
    finally:
        gc.unfreeze()
    return samples


def _measure_fresh(plan: _Plan) -> _Samples:
    samples = _Samples(extra={"method": FRESH, "minor_faults": {}, "gc_collections": {}})
    for _, name in plan.rounds():
        sample = measure_in_fresh_process(plan.case, name, plan.size)
        samples.add(name, sample.wall, sample.cpu)
        samples.extra["minor_faults"].setdefault(name, []).append(sample.minor_faults)
        samples.extra["gc_collections"].setdefault(name, []).append(list(sample.gc_collections))
    return samples


FRESH = "fresh process per repeat"
"""``Row.extra["method"]`` of the rows measured a fresh process per repeat."""


@dataclass(frozen=True)
class FreshSample:
    """One repeat measured in a fresh interpreter.

    Attributes:
        wall / cpu: seconds of the workload (the contender's own timing).
        minor_faults: the minor page faults of the process while the workload ran
            (``trio.run``'s start included): memory mapped for the first time.
        gc_collections: the garbage collections of generations 0, 1 and 2 meanwhile.
    """

    wall: float
    cpu: float
    minor_faults: int
    gc_collections: tuple[int, int, int]


def child_env() -> dict[str, str]:
    """The environment of a child interpreter: this one's, with ``PYTHONPATH`` set so the
    child imports what this process can (the package, and a checkout's peers)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
    return env


def _child(module: str, case: Case, contender: str, size: int) -> subprocess.CompletedProcess[str]:
    """Run ``python -m module CASE_MODULE CASE CONTENDER SIZE`` in a fresh interpreter."""
    command = [sys.executable, "-m", module, case.module, case.key, contender, str(size)]
    return subprocess.run(
        command, env=child_env(), capture_output=True, text=True, timeout=600, check=False
    )


def _last_json(text: str) -> Any:
    return json.loads(text.strip().splitlines()[-1])


def measure_in_fresh_process(case: Case, contender: str, size: int) -> FreshSample:
    """Time one repeat of ``contender`` at ``size`` in a new interpreter.

    The child (:mod:`trio_agent._bench._fresh`) imports the case's module, prepares the
    inputs and runs the workload once, timed as in this process; nothing runs before it.
    Blocks until the child exits (at most 10 minutes).

    Raises:
        RuntimeError: the child failed (the workload's checks included) or timed out;
            its stderr is in the message.
    """
    try:
        done = _child("trio_agent._bench._fresh", case, contender, size)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{case.key} {contender} at {size}: timed out") from exc
    if done.returncode != 0:
        raise RuntimeError(f"{case.key} {contender} at {size} failed:\n{done.stderr}")
    data = _last_json(done.stdout)
    g0, g1, g2 = data["gc_collections"]
    return FreshSample(
        wall=float(data["wall_s"]),
        cpu=float(data["cpu_s"]),
        minor_faults=int(data["minor_faults"]),
        gc_collections=(int(g0), int(g1), int(g2)),
    )


def rss_in_subprocess(case: Case, contender: str, size: int) -> int | None:
    """Peak RSS growth (bytes) of one repeat, in a fresh interpreter; None if unknown."""
    try:
        done = _child("trio_agent._bench._rss", case, contender, size)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        sys.stderr.write(f"\npeak RSS of {case.key} {contender} failed:\n{done.stderr}\n")
        return None
    try:
        value = _last_json(done.stdout)["peak_rss_growth"]
    except (ValueError, KeyError, IndexError):
        return None
    return int(value) if value is not None else None


# --- formatting ------------------------------------------------------------------------


def format_seconds(value: float | None) -> str:
    if value is None:
        return "—"
    a = abs(value)
    if a >= 1:
        return f"{value:.2f} s"
    if a >= 1e-3:
        return f"{value * 1e3:.1f} ms"
    if a >= 1e-6:
        return f"{value * 1e6:.1f} µs"
    return f"{value * 1e9:.0f} ns"


def format_bytes(value: float | None) -> str:
    if value is None:
        return "—"
    if abs(value) >= 1 << 20:
        return f"{value / (1 << 20):.1f} MB"
    if abs(value) >= 1 << 10:
        return f"{value / (1 << 10):.1f} KB"
    return f"{value:.0f} B"


RSS_RESOLUTION = 1 << 20
"""Below this, a peak-RSS growth says more about the allocator's arenas than the workload."""


def _memory_text(row: Row) -> str:
    ours, floor = row.rss.get("ours"), row.rss.get("floor")
    if ours is None and floor is None:
        return ""
    if max(ours or 0, floor or 0) < RSS_RESOLUTION:
        return "< 1 MB (below RSS resolution)"
    if row.memory_per_unit and row.n:
        text = (
            f"{format_bytes(ours / row.n if ours is not None else None)}"
            f" / {format_bytes(floor / row.n if floor is not None else None)} per {row.unit}"
        )
    else:
        text = f"{format_bytes(ours)} / {format_bytes(floor)}"
    if ours is not None and floor:
        text += f" ({ours / floor:.2f}×)"
    return text


def _render(headers: list[str], rows: list[list[str]], right: set[int]) -> str:
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, r, strict=True)]

    def line(cells: list[str]) -> str:
        parts = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(parts) + " |"

    sep = "|" + "|".join(
        ("-" * (w + 1) + ":") if i in right else ("-" * (w + 2)) for i, w in enumerate(widths)
    )
    return "\n".join([line(headers), sep + "|", *(line(r) for r in rows)])


def main_table(rows: Iterable[Row]) -> str:
    """The table of every row: ours vs the floor (markdown, readable as plain text)."""
    headers = ["workload", "size", "ours", "floor", "ratio", "ours / unit", "floor / unit"]
    headers.append("peak RSS growth ours / floor")
    body = []
    for row in rows:
        name = f"{row.workload} {row.case}".strip()
        if row.extra.get("phase") == "peers":
            name += " (peer phase)"
        unit = f" per {row.unit}" if row.unit else ""
        ratio = row.ratio
        body.append(
            [
                name,
                row.size,
                format_seconds(row.ours),
                format_seconds(row.floor),
                f"{ratio:.2f}×" if ratio is not None else "—",
                format_seconds(row.per_unit("ours")) + (unit if row.ours is not None else ""),
                format_seconds(row.per_unit("floor")) if row.floor is not None else "—",
                _memory_text(row) or row.note,
            ]
        )
    return _render(headers, body, right={2, 3, 4, 5, 6})


def peers_table(rows: Iterable[Row]) -> str | None:
    """Ours against each peer (how many times slower the peer is), or None without peers."""
    rows = [r for r in rows if r.peers]
    if not rows:
        return None
    names: list[str] = []
    for row in rows:
        names.extend(p for p in row.peers if p not in names)
    headers = ["workload", "size", "ours", *names]
    body = []
    for row in rows:
        ours = row.ours
        cells = [f"{row.workload} {row.case}".strip(), row.size, format_seconds(ours)]
        for name in names:
            value = row.median(name)
            if value is None:
                cells.append("—")
                continue
            text = format_seconds(value)
            if ours:
                times = value / ours
                text += f" ({times:.1f}× ours)" if times < 10 else f" ({times:.0f}× ours)"
            mem = row.rss.get(name)
            if mem is not None and row.memory_per_unit and row.n:
                text += f", {format_bytes(mem / row.n)}/{row.unit}"
            cells.append(text)
        body.append(cells)
    return _render(headers, body, right=set(range(2, len(headers))))


def tables(rows: list[Row]) -> str:
    out = [main_table(rows)]
    peer = peers_table(rows)
    if peer:
        out.extend(["", "Against the peers (their time, and how many times ours):", "", peer])
    return "\n".join(out)


def now_stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime())
