"""``python -m trio_agent._bench._rss MODULE CASE CONTENDER SIZE``: peak RSS growth of one repeat.

Runs in a fresh interpreter so that nothing measured before (other workloads, the
allocator's free arenas) counts: imports the case's module, runs one untimed warm-up at
the smallest quick size, prepares the inputs of SIZE (the model's scripts are not the
workload's memory), collects garbage, resets the kernel's peak-RSS mark
(``/proc/self/clear_refs``, Linux ≥ 4.0), then runs one repeat at SIZE and prints
``{"peak_rss_growth": bytes}`` — the peak RSS during the repeat minus the RSS before it.
Where the mark cannot be reset, ``ru_maxrss`` stands in (growth above the start).
"""

from __future__ import annotations

import gc
import json
import resource
import sys

from ._peers import load_contender


def _status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return False
    return True


def main(argv: list[str]) -> int:
    module_name, key, contender, size = argv
    case, measure = load_contender(module_name, key, contender)
    warm = case.quick_sizes[0]
    measure(warm, case.prepare(warm))
    inputs = case.prepare(int(size))
    gc.collect()
    if _reset_peak() and (before := _status_kb("VmRSS")) is not None:
        measure(int(size), inputs)
        peak = _status_kb("VmHWM")
        growth = None if peak is None else (peak - before) * 1024
    else:
        before_max = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        measure(int(size), inputs)
        growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before_max) * 1024
    print(json.dumps({"peak_rss_growth": growth}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
