"""The benchmark workloads and their bare-trio floors, run by ``trio-agent bench``.

The command line imports :func:`main` and the argument check :func:`positive` from
here; the workloads are scripted with the test kit (``trio_agent.testing``).
"""

from ._cli import positive
from .suite import main

__all__ = ["main", "positive"]
