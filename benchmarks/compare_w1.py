"""W1 "no consumer", this checkout against another commit, in one process.

    python -m benchmarks.compare_w1 REV [--turns 20 200 1000] [--repeats 30]

The other commit's ``src/trio_agent`` is extracted (``git archive``) into a temporary
folder as the package ``trio_agent_base`` (the package imports itself relatively, so
the copy is self-contained) and imported next to ours. Each size runs the same script —
T one-call turns, then a final text, through ``run_agent_loop`` with no consumer —
alternately through each package, ``repeats`` times, and prints the ratio of the
medians and the median of the per-repeat ratios, in wall time and in thread CPU time.
On a shared machine the CPU figures are the steadier: other processes inflate wall time
without charging this thread. What a change costs the loop shows here without any
floor, because both versions run in the same process under the same load.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

import trio_agent

if TYPE_CHECKING:
    from types import ModuleType

BASE = "trio_agent_base"


def extract(rev: str, into: Path) -> ModuleType:
    """``rev``'s package, imported as :data:`BASE`."""
    root = Path(__file__).resolve().parent.parent
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", rev, "src/trio_agent"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    shutil.move(str(into / "src" / "trio_agent"), str(into / BASE))
    sys.path.insert(0, str(into))
    return importlib.import_module(BASE)


def runner(package: Any, turns: int) -> Any:
    """A function that runs the W1 script once through ``package``; returns
    (wall seconds, thread CPU seconds)."""
    testing = importlib.import_module(package.__name__ + ".testing")

    async def noop(call: Any, args: Any, ctx: Any) -> str:
        return "ok"

    tool = package.Tool(
        name="noop",
        description="Does nothing.",
        parameters={"type": "object", "properties": {}},
        execute=noop,
    )
    replies = [
        testing.events_for(
            package.AssistantMessage(
                content=(package.ToolCall(id=f"call-{i}", name="noop", arguments={}),),
                stop_reason="tool_use",
            )
        )
        for i in range(turns)
    ]
    replies.append(
        testing.events_for(
            package.AssistantMessage(content=(package.Text(text="done"),), stop_reason="stop")
        )
    )
    config = package.LoopConfig(max_steps=turns + 1)
    context = package.Context(tools=(tool,))

    async def once() -> tuple[float, float]:
        model = testing.ScriptedModel(replies)
        prompts = [package.UserMessage.text("go")]
        wall, cpu = time.perf_counter(), time.thread_time()
        result = await package.run_agent_loop(prompts, context, model, config)
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        assert result.reason == "stop", result.reason
        return wall, cpu

    return lambda: trio.run(once)


def compare(base: ModuleType, turns: int, repeats: int) -> str:
    ours, theirs = runner(trio_agent, turns), runner(base, turns)
    for fn in (ours, theirs):
        fn()
        fn()
    samples: dict[str, list[tuple[float, float]]] = {"ours": [], "base": []}
    gc.collect()
    gc.freeze()
    try:
        for r in range(repeats):
            order = ("ours", "base") if r % 2 == 0 else ("base", "ours")
            for name in order:
                gc.collect()
                samples[name].append((ours if name == "ours" else theirs)())
    finally:
        gc.unfreeze()
    parts = [f"T={turns:<5} repeats={repeats}"]
    for i, label in ((0, "wall"), (1, "cpu")):
        a = [s[i] for s in samples["ours"]]
        b = [s[i] for s in samples["base"]]
        paired = statistics.median(x / y for x, y in zip(a, b, strict=True))
        mine, base_ = statistics.median(a), statistics.median(b)
        parts.append(
            f"{label}: ours {mine * 1e3:.2f} ms, base {base_ * 1e3:.2f} ms, "
            f"ratio {mine / base_:.3f} (paired {paired:.3f})"
        )
    return " | ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", help="the commit to compare with (anything git archive takes)")
    parser.add_argument("--turns", type=int, nargs="+", default=[20, 200, 1000])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = extract(args.rev, Path(tmp))
        print(f"ours: {Path(trio_agent.__file__).parent}; base: {args.rev}")
        for turns in args.turns:
            print(compare(base, turns, args.repeats), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
