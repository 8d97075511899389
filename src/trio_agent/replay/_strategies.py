"""``faults(cassette)``: a Hypothesis strategy of faults over recorded traffic.

This module imports Hypothesis (a test dependency); ``trio_agent.replay`` and
``trio_agent.testing`` load it only when the strategy is first accessed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, get_args

from hypothesis import strategies as st

from ._cassette import Cassette, load_cassette
from ._replay import Fault, FaultKind

if TYPE_CHECKING:
    import os
    from collections.abc import Sequence

__all__ = ["faults"]

FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)


def faults(
    cassette: Cassette | str | os.PathLike[str],
    *,
    kinds: Sequence[FaultKind] = FAULT_KINDS,
) -> st.SearchStrategy[Fault]:
    """A :class:`Fault` at any event of any recorded request of ``cassette``.

    Draws a request index, then an event index among that record's events (0 when it
    has none), then a kind from ``kinds``. Shrinks toward the first event of the first
    request and the first kind. Pass the fault to ``ReplayModel(..., faults=[fault])``.

    Raises:
        ValueError: the cassette has no record, or ``kinds`` is empty or unknown.
    """
    if not isinstance(cassette, Cassette):
        cassette = load_cassette(cassette)
    if not cassette.records:
        raise ValueError("faults() needs a cassette with at least one record")
    if not kinds or any(k not in FAULT_KINDS for k in kinds):
        raise ValueError(f"kinds must be a non-empty subset of {FAULT_KINDS}, got {kinds!r}")
    counts = [len(r.events) for r in cassette.records]

    @st.composite
    def draw(data: st.DrawFn) -> Fault:
        request = data(st.integers(0, len(counts) - 1))
        event = data(st.integers(0, max(counts[request] - 1, 0)))
        kind = data(st.sampled_from(tuple(kinds)))
        return Fault(request=request, event=event, kind=kind)

    return draw()
