"""Cancellation, the run's way: what to raise for a group, and the scope a run skips.

Exception groups: a run, an ``open_agent_loop`` block and the command line raise one
exception, never a group — :func:`representative` picks it: a ``KeyboardInterrupt`` (or
another non-``Exception``) first, then an ``Exception``, then ``Cancelled``, so no
library error and no ``Cancelled`` ever reaches a caller wrapped.

:data:`NO_SCOPE` stands in for a cancel scope a run does not need: entering a real scope
costs about as much as a checkpoint, and a run that nothing outside can cancel has none.
"""

from __future__ import annotations

import contextlib

import trio

__all__ = ["NO_SCOPE", "representative"]

NO_SCOPE = contextlib.nullcontext()
"""Stands in for a cancel scope a run does not need (``with scope or NO_SCOPE:``)."""


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:
            out.extend(_leaves(inner))
        return out
    return [exc]


def representative(exc: BaseException) -> BaseException:
    """The one exception to raise for a (possibly grouped) failure.

    Order: a non-``Exception`` (KeyboardInterrupt...) first, then an ``Exception``, then
    ``Cancelled`` — so no library error and no Cancelled ever reaches a caller wrapped.
    """
    leaves = _leaves(exc)
    for leaf in leaves:
        if not isinstance(leaf, Exception | trio.Cancelled):
            return leaf
    for leaf in leaves:
        if isinstance(leaf, Exception):
            return leaf
    return leaves[0]
