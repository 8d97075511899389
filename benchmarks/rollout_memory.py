"""Where the memory of in-flight rollouts goes (``bench_rollouts --where``).

- :func:`heap`: how the heap is used (pymalloc's arenas, live blocks and free ones;
  glibc malloc's bytes in use and free), cheap, read at every measurement;
- with ``--where`` (tracemalloc, slow: a dedicated mode, memory only): the live bytes
  traced since the rollouts started, the bytes of the in-flight token arrays, the top
  allocation sites, and the same at the traced peak before the barrier. With
  ``--where=ours`` each allocation is charged to the innermost frame in trio-agent's
  own code (what trio and the HTTP client allocate on its behalf included).
"""

from __future__ import annotations

import gc
import os
import sys
import tracemalloc
from typing import Any


def heap() -> dict[str, int]:
    """How the process's heap is used, in bytes: pymalloc (Python's allocator for
    objects of 512 bytes or less: its arenas, the bytes in live blocks, the free bytes
    in partly used pools, the wholly free pools) and glibc's malloc (larger objects:
    the bytes in use and the free bytes it holds). Free bytes count in the RSS but
    hold no object: what the RSS shows beyond the live objects is mostly these."""
    import ctypes
    import tempfile

    out: dict[str, int] = {}
    names = {
        "# bytes in allocated blocks": "py_blocks",
        "# bytes in available blocks": "py_free_blocks",
        "free pools": "py_free_pools",
        "arenas * ": "py_arenas",
    }
    with tempfile.TemporaryFile() as f:
        saved = os.dup(2)
        sys.stderr.flush()
        os.dup2(f.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        for line in f.read().decode().splitlines():
            for marker, key in names.items():
                if marker in line and "=" in line:
                    out[key] = int(line.rsplit("=", 1)[1].replace(",", ""))
    try:

        class MallInfo2(ctypes.Structure):
            _fields_ = [
                (name, ctypes.c_size_t)
                for name in (
                    "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
                ).split()
            ]

        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = MallInfo2
        info = libc.mallinfo2()
        out["malloc_used"] = info.uordblks + info.hblkhd
        out["malloc_free"] = info.fordblks
    except (OSError, AttributeError):
        pass  # not glibc
    return out


def where_start() -> None:
    """With ``--where``: start tracing allocations (before the rollouts start)."""
    if os.environ.get("BENCH_WHERE"):
        gc.collect()
        tracemalloc.start(WHERE_FRAMES)
        _where_base.append(tracemalloc.take_snapshot())


WHERE_FRAMES = 12
_where_base: list[tracemalloc.Snapshot] = []


def _token_bytes() -> tuple[int, int, int]:
    """The bytes the in-flight token arrays take, as held (every ``Tokens``: its
    tuples and the int/float objects in them not shared with the interpreter's small
    ints), their packed size (4 bytes an id, 8 a logprob), and the count of ids."""
    from trio_agent import Tokens

    held = packed = count = 0
    seen: set[int] = set()
    for obj in gc.get_objects():
        if type(obj) is not Tokens:
            continue
        for array in (obj.prompt_ids, obj.completion_ids, obj.logprobs):
            held += sys.getsizeof(array)
            for item in array:
                if id(item) not in seen and not (type(item) is int and -5 <= item <= 256):
                    seen.add(id(item))
                    held += sys.getsizeof(item)
        count += len(obj.prompt_ids) + len(obj.completion_ids)
        packed += 4 * (len(obj.prompt_ids) + len(obj.completion_ids)) + 8 * len(obj.logprobs)
    return held, packed, count


def _site(trace: tracemalloc.Traceback) -> str:
    """Where an allocation was made, named by the innermost frame that is not in the
    standard library's generic helpers (so attrs-generated initialisers and
    ``json`` calls are named by their caller)."""
    generic = ("<attrs generated", "/json/", "/copy.py", "/abc.py", "/functools.py")
    for frame in reversed(trace):  # a Traceback lists the oldest frame first
        name = frame.filename
        if not any(g in name for g in generic):
            return f"{_short(name)}:{frame.lineno}"
    return f"{_short(trace[-1].filename)}:{trace[-1].lineno}"


def _our_site(trace: tracemalloc.Traceback) -> str:
    """Where an allocation was made, named by the innermost frame in trio-agent's own
    code (``--where=ours``: the memory trio and the HTTP client allocate on its
    behalf is charged to the call that caused it)."""
    for frame in reversed(trace):
        if "trio_agent/" in frame.filename or "benchmarks/" in frame.filename:
            return f"{_short(frame.filename)}:{frame.lineno}"
    return _site(trace)


def _short(filename: str) -> str:
    for marker in ("/src/", "/site-packages/", "/lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def where() -> dict[str, Any]:
    """Live bytes traced since :func:`where_start`, the in-flight tokens' bytes, and
    the top allocation sites (bytes and blocks still live)."""
    live, top = _sites(tracemalloc.take_snapshot())
    held, packed, count = _token_bytes()
    out = {
        "live": live,
        "tokens_held": held,
        "tokens_packed": packed,
        "token_ids": count,
        "top": top,
    }
    if len(_where_base) > 1:
        out["peak"], out["peak_top"] = _sites(_where_base[1])
    return out


def _sites(snapshot: tracemalloc.Snapshot) -> tuple[int, list[tuple[str, int, int]]]:
    """The bytes ``snapshot`` holds beyond the baseline, and its top sites."""
    diff = snapshot.compare_to(_where_base[0], "traceback")
    sites: dict[str, list[int]] = {}
    ours = os.environ.get("BENCH_WHERE") == "ours"
    for d in diff:
        slot = sites.setdefault(_our_site(d.traceback) if ours else _site(d.traceback), [0, 0])
        slot[0] += d.size_diff
        slot[1] += d.count_diff
    top = sorted(sites.items(), key=lambda kv: -kv[1][0])[:WHERE_TOP]
    return sum(d.size_diff for d in diff), [(site, size, blocks) for site, (size, blocks) in top]


async def watch_peak(done: Any) -> None:
    """With ``--where``: until ``done`` is set, keep a snapshot of the traced heap at
    its largest (checked every 50 ms), to show what is alive at the peak."""
    import trio

    if not os.environ.get("BENCH_WHERE"):
        return
    best = 0
    while not done.is_set():
        await trio.sleep(0.05)
        current = tracemalloc.get_traced_memory()[0]
        if current > best * 1.05:
            best = current
            _where_base[1:] = [tracemalloc.take_snapshot()]


WHERE_TOP = 25


def print_heap(r: dict[str, Any], n: int) -> None:
    """The heap's growth per in-flight rollout (see :func:`heap`)."""
    d = {k: (v - r["heap_before"].get(k, 0)) / n for k, v in r["heap"].items()}
    print(
        f"  heap per rollout: pymalloc arenas {d.get('py_arenas', 0):,.0f} (live blocks "
        f"{d.get('py_blocks', 0):,.0f}, free in used pools {d.get('py_free_blocks', 0):,.0f}, "
        f"free pools {d.get('py_free_pools', 0):,.0f}); malloc in use "
        f"{d.get('malloc_used', 0):,.0f}, malloc free {d.get('malloc_free', 0):,.0f}",
        flush=True,
    )


def print_where(w: dict[str, Any], n: int) -> None:
    """The ``--where`` breakdown, per in-flight rollout."""
    live, held = w["live"] / n, w["tokens_held"] / n
    print(
        f"\n  traced live bytes per rollout: {live:,.0f}; the token arrays as held: "
        f"{held:,.0f} ({w['token_ids'] / n:,.0f} ids; {w['tokens_packed'] / n:,.0f} bytes "
        f"packed); beyond the tokens: {live - held:,.0f} bytes\n"
    )
    print("  | site | bytes per rollout | blocks per rollout |")
    print("  |---|---:|---:|")
    for site, size, blocks in w["top"]:
        print(f"  | {site} | {size / n:,.0f} | {blocks / n:,.1f} |")
    if "peak" in w:
        print(f"\n  at the traced peak before that: {w['peak'] / n:,.0f} bytes per rollout\n")
        print("  | site | bytes per rollout | blocks per rollout |")
        print("  |---|---:|---:|")
        for site, size, blocks in w["peak_top"]:
            print(f"  | {site} | {size / n:,.0f} | {blocks / n:,.1f} |")
    print(flush=True)
