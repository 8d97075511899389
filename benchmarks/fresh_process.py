"""W2 and W3 measured in a fresh interpreter per measurement, independently of the suite.

    python -m benchmarks.fresh_process [--only W2|W3] [--rounds 7] [--size N]
        [--variant NAME ...] [--bench-repeats N] [--callgrind] [--json OUT]

Each measurement is one ``python -c`` child: it imports the workload's module, prepares
the inputs, runs the one workload it was given once and prints what it saw as JSON. In
every round each variant's pair of children runs (``ours, floor`` in even rounds,
``floor, ours`` in odd ones), so that all variants see the same load; the figures are
medians over the rounds. Nothing of the suite's harness is used but the workload
functions themselves (which time only the workload, with ``time.perf_counter`` inside
their ``trio.run``); ``--bench-repeats N`` adds, once per round, a child that runs the
suite's in-process method (``measure_case(..., in_process=True)``, N repeats) for
comparison.

Printed per variant: the ratio of the medians, the per-round ratios (lowest, median,
highest), the ratio of CPU times, of the time around the whole ``trio.run`` call
("with trio.run") and of the children's whole lives seen from the parent (start-up,
imports, inputs, run, exit: "whole process"); per contender the median time and its
range, the page faults and the collections with their time.

``--callgrind`` counts instructions instead: one child per contender and variant under
``valgrind --tool=callgrind`` (hash seed and trio's scheduler seeded, so the count is the
same every time), the workload's instructions and those inside the collector.

Every child also reports, for the timed region only:

- ``minflt``: the minor page faults (``getrusage(RUSAGE_SELF).ru_minflt``): memory the
  process maps for the first time; a process that reuses memory it already mapped
  (pymalloc arenas, malloc's free lists) pays none;
- ``gc_counts`` / ``gc_s``: the collections per generation and the seconds spent in
  them (``gc.callbacks``); ``full``: per full (generation 2) collection, the memory
  blocks allocated when it started (``sys.getallocatedblocks()``, about the objects it
  walks) and its seconds; ``tracked``: the objects the collector tracks before the
  workload (the imports and the prepared inputs).

The *variants* put back, one at a time, what the suite's in-process measurement does and
a fresh process does not, so that each one's share of the difference can be read:

``fresh``
    what a fresh process sees: import, prepare, measure.
``warm``
    first one untimed run of each contender at the smallest size (the suite's warm-up).
``freeze``
    ``gc.collect(); gc.freeze()`` after preparing (the suite freezes the heap).
``freeze-imports``
    the same right after the imports, before preparing: only the modules' objects are
    out of the full collections' walk (their share of it).
``collect``
    ``gc.collect()`` right before the timed run (the suite collects before every
    repeat): the collector's generation counts start at zero.
``premapped``
    first one untimed run of the same contender at the full size, then
    ``gc.collect()``: the memory the workload needs is mapped already (what the second
    and later repeats of the suite see).
``suite``
    all of the above together (``warm`` + ``premapped`` + ``freeze`` + ``collect``):
    the suite's conditions from its second repeat on.
``gc-off``
    the collector disabled during the timed run (how much of the time is collection).
``bare-floor``
    ours as in ``fresh``, against a floor child that imports trio and nothing of this
    package: the same loop on look-alike inputs (one small slotted object per event,
    per call, per message), as a program written with trio alone would run it.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

WORKLOADS = {
    "W2": ("trio_agent._bench.bench_batch", 10_000),
    "W3": ("trio_agent._bench.bench_runs", 1_000),
}

WHO = ("ours", "floor")

VARIANTS = (
    "fresh",
    "warm",
    "freeze",
    "freeze-imports",
    "collect",
    "premapped",
    "suite",
    "gc-off",
    "bare-floor",
)

# The child: one measurement, everything it saw printed as one JSON line. Kept as text
# so that it runs in a bare ``python -c``, importing nothing of this file.
CHILD = r"""
import gc, importlib, json, os, resource, sys, time
t0 = time.perf_counter()
counting = bool(os.environ.get("FRESH_PROCESS_CALLGRIND"))
if counting:
    import trio
    trio._core._run._r.seed(0)  # the scheduler's shuffles, the same in every child
module_name, who, size, variant = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
module = importlib.import_module(module_name)
t1 = time.perf_counter()
if variant == "freeze-imports":
    gc.collect()
    gc.freeze()
(case,) = module.CASES
measure = {"ours": case.ours, "floor": case.floor}[who]
if variant in ("warm", "suite"):
    warm = case.quick_sizes[0]
    inputs = case.prepare(warm)
    case.ours(warm, inputs)
    case.floor(warm, inputs)
    del inputs
inputs = case.prepare(size)
t2 = time.perf_counter()
if variant in ("premapped", "suite"):
    measure(size, inputs)
    gc.collect()
if variant in ("freeze", "suite"):
    gc.collect()
    gc.freeze()
if variant in ("collect", "suite"):
    gc.collect()
spent = [0.0, 0.0, 0.0]
counts = [0, 0, 0]
full = []
started = [0.0, 0]
def on_gc(phase, info):
    if phase == "start":
        started[0] = time.perf_counter()
        if info["generation"] == 2:
            started[1] = sys.getallocatedblocks()
    else:
        g = info["generation"]
        took = time.perf_counter() - started[0]
        spent[g] += took
        counts[g] += 1
        if g == 2:
            full.append((started[1], took))
tracked = len(gc.get_objects())
if variant == "gc-off":
    gc.disable()
if not counting:
    gc.callbacks.append(on_gc)
before = resource.getrusage(resource.RUSAGE_SELF)
os.getppid()  # under callgrind, the counts are dumped here ...
outer_wall, outer_cpu = time.perf_counter(), time.process_time()
wall, cpu = measure(size, inputs)
outer_wall, outer_cpu = time.perf_counter() - outer_wall, time.process_time() - outer_cpu
os.getppid()  # ... and here: the second dump is the workload's
after = resource.getrusage(resource.RUSAGE_SELF)
if not counting:
    gc.callbacks.remove(on_gc)
print(json.dumps({
    "wall": wall, "cpu": cpu, "outer_wall": outer_wall, "outer_cpu": outer_cpu,
    "minflt": after.ru_minflt - before.ru_minflt,
    "gc_counts": counts, "gc_s": spent, "tracked": tracked, "full": full,
    "frozen": gc.get_freeze_count(), "import_s": t1 - t0, "prepare_s": t2 - t1,
}))
"""


# The floor of a program that never imports trio_agent: the suite's own floor functions
# (their source, handed over in argv[3]) on inputs of the same shape — events, calls and
# messages as small slotted objects.
BARE_FLOOR = r"""
import gc, json, os, resource, sys, time
t0 = time.perf_counter()
import trio
t1 = time.perf_counter()
if os.environ.get("FRESH_PROCESS_CALLGRIND"):
    trio._core._run._r.seed(0)
workload, size, source = sys.argv[1], int(sys.argv[2]), sys.argv[3]

class Ev:
    __slots__ = ("kind", "index")
    def __init__(self, kind, index=0):
        self.kind, self.index = kind, index

class Call:
    __slots__ = ("id", "name", "arguments")
    def __init__(self, id, name, arguments):
        self.id, self.name, self.arguments = id, name, arguments

class Message:
    __slots__ = ("tool_calls",)
    def __init__(self, tool_calls):
        self.tool_calls = tool_calls

class Done:
    __slots__ = ("message",)
    def __init__(self, message):
        self.message = message

floor = {"trio": trio, "Done": Done}
exec(source, floor)

def reply(n):
    calls = tuple(Call(f"call-{i}", "sleep", {}) for i in range(n))
    events = [Ev("start")]
    for i in range(n):
        events += [Ev("call_start", i), Ev("call_delta", i), Ev("call_end", i)]
    return events + [Done(Message(calls))]

FINAL = [Ev("start"), Ev("text_start"), Ev("text_delta"), Ev("text_end"), Done(Message(()))]

async def main(replies):
    tools = {"sleep": floor["sleep_tool"]}
    runs = size if workload == "W3" else 1
    transcripts = [None] * runs
    async def one(i):
        transcripts[i] = await floor["floor_loop"](replies, tools)
    cpu, wall = time.process_time(), time.perf_counter()
    async with trio.open_nursery() as nursery:
        for i in range(runs):
            nursery.start_soon(one, i)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert all(len(t) == len(transcripts[0]) for t in transcripts)
    return wall, cpu

replies = (reply(1 if workload == "W3" else size), FINAL)
t2 = time.perf_counter()
counts = [g["collections"] for g in gc.get_stats()]
tracked = len(gc.get_objects())
before = resource.getrusage(resource.RUSAGE_SELF)
os.getppid()
outer_wall, outer_cpu = time.perf_counter(), time.process_time()
wall, cpu = trio.run(main, replies)
outer_wall, outer_cpu = time.perf_counter() - outer_wall, time.process_time() - outer_cpu
os.getppid()
after = resource.getrusage(resource.RUSAGE_SELF)
counts = [g["collections"] - c for g, c in zip(gc.get_stats(), counts)]
print(json.dumps({
    "wall": wall, "cpu": cpu, "outer_wall": outer_wall, "outer_cpu": outer_cpu,
    "minflt": after.ru_minflt - before.ru_minflt,
    "gc_counts": counts, "gc_s": [0.0, 0.0, 0.0], "tracked": tracked, "full": [],
    "frozen": 0, "import_s": t1 - t0, "prepare_s": t2 - t1,
}))
"""


def bare_floor_source() -> str:
    """The source of the suite's floor loop and sleeping tool, to run without the package."""
    from trio_agent._bench import bench_batch, bench_turns
    from trio_agent._run._streams import MemoryStream

    parts = [
        "from __future__ import annotations",
        "from typing import Generic, TypeVar",
        "from trio.lowlevel import checkpoint, checkpoint_if_cancelled",
        '_T = TypeVar("_T")',
        f"SLEEP = {bench_batch.SLEEP!r}",
        *(
            inspect.getsource(f)
            for f in (
                MemoryStream,
                bench_turns.read_reply,
                bench_turns.run_call,
                bench_turns.floor_loop,
                bench_batch.sleep_tool,
            )
        ),
    ]
    return "\n\n".join(parts)


BENCH_CHILD = r"""
import json, sys
from trio_agent._bench._harness import measure_case
import importlib
module_name, size, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
(case,) = importlib.import_module(module_name).CASES
row = measure_case(case, size, repeats=repeats, memory=False, in_process=True)
print(json.dumps({"ours": row.ours, "floor": row.floor, "ratio": row.ratio,
                  "cpu_ratio": row.cpu_ratio}))
"""


def child(module: str, who: str, size: int, variant: str) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter; what it printed, and ``process_s``:
    the child's whole life seen from here (start-up, imports, inputs, the workload and
    the exit)."""
    started = time.perf_counter()
    result = _run(_command(module, who, size, variant), f"{module} {who} {variant}")
    result["process_s"] = time.perf_counter() - started
    result["load"] = os.getloadavg()[0]
    return result


def _command(module: str, who: str, size: int, variant: str) -> list[str]:
    """The command line of one measurement's child."""
    if variant == "bare-floor" and who == "floor":
        workload = next(w for w, (m, _) in WORKLOADS.items() if m == module)
        return [sys.executable, "-c", BARE_FLOOR, workload, str(size), bare_floor_source()]
    return [sys.executable, "-c", CHILD, module, who, str(size), variant]


def _run(command: list[str], what: str) -> dict[str, Any]:
    """Run a child to its end; the JSON object of its last line of output.

    Raises:
        RuntimeError: the child failed (its stderr in the message).
    """
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def bench_child(module: str, size: int, repeats: int) -> dict[str, Any]:
    """The suite's in-process measurement (``measure_case(..., in_process=True)``) of
    one size, in a child of its own: the medians of its ``repeats``."""
    return _run(
        [sys.executable, "-c", BENCH_CHILD, module, str(size), str(repeats)],
        f"{module} in-process",
    )


def count_instructions(module: str, who: str, size: int, variant: str) -> dict[str, int]:
    """Instructions of the workload in a child under ``valgrind --tool=callgrind`` (the
    hash seed and trio's scheduler seeded, so the same count every time): ``total`` and
    ``gc`` (inside the collector, inclusive)."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "cg.out")
        command = [
            "valgrind",
            "--tool=callgrind",
            "--dump-before=os_getppid",
            f"--callgrind-out-file={out}",
            *_command(module, who, size, variant),
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0", "FRESH_PROCESS_CALLGRIND": "1"}
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, timeout=3600, env=env
        )
        if done.returncode != 0:
            raise RuntimeError(f"{module} {who} {variant} under callgrind:\n{done.stderr}")
        dump = out + ".2"
        with open(dump, encoding="utf-8") as f:
            total = next(int(line.split()[1]) for line in f if line.startswith("totals:"))
        annotated = subprocess.run(
            ["callgrind_annotate", "--inclusive=yes", "--threshold=100", dump],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    gc_ir = 0
    for line in annotated.splitlines():
        if "gc_collect_main" in line:
            gc_ir = max(gc_ir, int(line.split()[0].replace(",", "")))
    return {"total": total, "gc": gc_ir}


def measure(
    workload: str, size: int, variants: list[str], rounds: int, bench_repeats: int
) -> dict[str, Any]:
    """``rounds`` rounds; in each, every variant's pair of children (ours and the floor,
    the order alternating between rounds) and, if ``bench_repeats``, one in-process
    measurement by the suite's method — so that all of them see the same load."""
    module = WORKLOADS[workload][0]
    seen: dict[str, Any] = {v: {"ours": [], "floor": []} for v in variants}
    seen["bench"] = []
    for r in range(rounds):
        for variant in variants:
            for who in ("ours", "floor") if r % 2 == 0 else ("floor", "ours"):
                seen[variant][who].append(child(module, who, size, variant))
                print(".", end="", file=sys.stderr, flush=True)
        if bench_repeats:
            seen["bench"].append(bench_child(module, size, bench_repeats))
            print("b", end="", file=sys.stderr, flush=True)
    return seen


def summary(seen: dict[str, list[Any]]) -> dict[str, Any]:
    """Medians per contender, the ratio of the medians and the per-round ratios' range."""

    def med(who: str, key: str, i: int | None = None) -> float:
        values = [s[key] if i is None else s[key][i] for s in seen[who]]
        return float(statistics.median(values))

    pairs = [o["wall"] / f["wall"] for o, f in zip(seen["ours"], seen["floor"], strict=True)]
    out: dict[str, Any] = {
        "ratio": med("ours", "wall") / med("floor", "wall"),
        "cpu_ratio": med("ours", "cpu") / med("floor", "cpu"),
        "paired_min": min(pairs),
        "paired_max": max(pairs),
        "paired_median": statistics.median(pairs),
        "process_ratio": med("ours", "process_s") / med("floor", "process_s"),
        "outer_ratio": med("ours", "outer_wall") / med("floor", "outer_wall"),
    }
    for who in ("ours", "floor"):
        out[who] = {
            "wall": med(who, "wall"),
            "wall_min": min(s["wall"] for s in seen[who]),
            "wall_max": max(s["wall"] for s in seen[who]),
            "cpu": med(who, "cpu"),
            "minflt": med(who, "minflt"),
            "gc_counts": [med(who, "gc_counts", g) for g in range(3)],
            "gc_s": [med(who, "gc_s", g) for g in range(3)],
            "tracked": med(who, "tracked"),
            "process_s": med(who, "process_s"),
            "import_s": med(who, "import_s"),
        }
    return out


def _line(workload: str, size: int, variant: str, s: dict[str, Any]) -> str:
    o, f = s["ours"], s["floor"]
    return (
        f"{workload} {size:>6} {variant:<9} ratio {s['ratio']:.2f}× "
        f"(pairs {s['paired_min']:.2f}–{s['paired_median']:.2f}–{s['paired_max']:.2f}, "
        f"cpu {s['cpu_ratio']:.2f}×, with trio.run {s['outer_ratio']:.2f}×, "
        f"whole process {s['process_ratio']:.2f}×) | "
        f"ours {o['wall'] * 1e3:6.1f} ms [{o['wall_min'] * 1e3:.0f}–{o['wall_max'] * 1e3:.0f}] "
        f"flt {o['minflt']:6.0f} gc {o['gc_counts'][0]:.0f}/{o['gc_counts'][1]:.0f}/"
        f"{o['gc_counts'][2]:.0f} {sum(o['gc_s']) * 1e3:5.1f} ms | "
        f"floor {f['wall'] * 1e3:6.1f} ms [{f['wall_min'] * 1e3:.0f}–{f['wall_max'] * 1e3:.0f}] "
        f"flt {f['minflt']:6.0f} gc {f['gc_counts'][0]:.0f}/{f['gc_counts'][1]:.0f}/"
        f"{f['gc_counts'][2]:.0f} {sum(f['gc_s']) * 1e3:5.1f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fresh_process")
    parser.add_argument("--only", choices=sorted(WORKLOADS), action="append")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--size", type=int, help="instead of W2's 10,000 / W3's 1,000")
    parser.add_argument("--variant", choices=VARIANTS, action="append")
    parser.add_argument(
        "--bench-repeats",
        type=int,
        default=0,
        metavar="N",
        help="also, once per round, the suite's in-process measurement (N repeats)",
    )
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="count instructions instead (one child per contender and variant, slow)",
    )
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args(argv)
    results: list[dict[str, Any]] = []
    variants = args.variant or ["fresh"]
    if args.callgrind:
        for workload in args.only or sorted(WORKLOADS):
            module, default_size = WORKLOADS[workload]
            size = args.size or default_size
            for variant in variants:
                counts = {who: count_instructions(module, who, size, variant) for who in WHO}
                results.append({"workload": workload, "variant": variant, **counts})
                o, f = counts["ours"], counts["floor"]
                print(
                    f"{workload} {size:>6} {variant:<14} instructions"
                    f" ours {o['total'] / 1e6:8.1f} M"
                    f" (gc {o['gc'] / 1e6:7.1f} M), floor {f['total'] / 1e6:8.1f} M"
                    f" (gc {f['gc'] / 1e6:7.1f} M): ratio {o['total'] / f['total']:.3f},"
                    f" outside gc {(o['total'] - o['gc']) / (f['total'] - f['gc']):.3f}",
                    flush=True,
                )
        if args.json:
            with open(args.json, "w", encoding="utf-8") as out:
                json.dump(results, out, indent=1)
        return 0
    for workload in args.only or sorted(WORKLOADS):
        size = args.size or WORKLOADS[workload][1]
        seen = measure(workload, size, variants, args.rounds, args.bench_repeats)
        print("", file=sys.stderr)
        for variant in variants:
            s = summary(seen[variant])
            print(_line(workload, size, variant, s), flush=True)
            results.append(
                {"workload": workload, "size": size, "variant": variant, **s, "raw": seen[variant]}
            )
        if seen["bench"]:
            ratios = [b["ratio"] for b in seen["bench"]]
            print(
                f"{workload} {size:>6} in-process (the suite's method, "
                f"{args.bench_repeats} repeats per round): ratio "
                f"{statistics.median(ratios):.2f}× (rounds {min(ratios):.2f}–{max(ratios):.2f}); "
                f"ours {statistics.median(b['ours'] for b in seen['bench']) * 1e3:.1f} ms, "
                f"floor {statistics.median(b['floor'] for b in seen['bench']) * 1e3:.1f} ms",
                flush=True,
            )
            results.append({"workload": workload, "size": size, "variant": "bench",
                            "raw": seen["bench"]})  # fmt: skip
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
