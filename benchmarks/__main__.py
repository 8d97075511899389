"""``python -m benchmarks``: the same as ``trio-agent bench``."""

from __future__ import annotations

import argparse
import sys

from trio_agent._bench.suite import main
from trio_agent.cli.bench import add_arguments

if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="trio-agent's benchmarks: each workload against a bare trio floor.",
    )
    add_arguments(parser)
    sys.exit(main(parser.parse_args()))
