"""``python -m trio_agent._bench._fresh MODULE CASE CONTENDER SIZE``: one repeat, fresh.

What an application's process sees: this interpreter imports the case's module,
prepares the inputs of SIZE and runs the contender's workload once, with nothing before
it — no warm-up run, no ``gc.collect()`` or ``gc.freeze()``, no memory left mapped by an
earlier repeat. It prints one JSON line::

    {"wall_s": ..., "cpu_s": ..., "minor_faults": ..., "gc_collections": [g0, g1, g2]}

``wall_s`` and ``cpu_s`` are the contender's own timing (the workload only, inside its
event loop); ``minor_faults`` the page faults of the process meanwhile (memory mapped for
the first time) and ``gc_collections`` the garbage collections per generation, both read
around the call without hooks that would cost time.
"""

from __future__ import annotations

import gc
import json
import resource
import sys

from ._peers import load_contender


def main(argv: list[str]) -> int:
    module_name, key, contender, size_text = argv
    case, measure = load_contender(module_name, key, contender)
    size = int(size_text)
    inputs = case.prepare(size)
    collections = [g["collections"] for g in gc.get_stats()]
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    wall, cpu = measure(size, inputs)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    collections = [g["collections"] - c for g, c in zip(gc.get_stats(), collections, strict=True)]
    print(
        json.dumps(
            {"wall_s": wall, "cpu_s": cpu, "minor_faults": faults, "gc_collections": collections}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
