"""What a finished assistant reply means for the run (sans-IO, no trio).

Theory of operation: after each reply the loop asks :func:`decide` what to do. The answer
is data — run the calls, or give each distinct call a skipped result — plus whether the
run ends and why. This is the stop-reason table, row by row:

============================  ===========  ==================================  ============
stop reason and content        tools run    results appended                    next
============================  ===========  ==================================  ============
duplicate call ids             0            one skipped result per distinct id  end error
tool_use + ≥1 call             each once    its result                          next request
stop + no calls                0            none                                natural end
length + calls, continue flag  0            skipped: re-issue the call          next request
length / error / aborted       0            a skipped result per call           end (reason)
stop + ≥1 call                 0            skipped (unexpected stop)           end error
tool_use + no calls            0            none                                end error
============================  ===========  ==================================  ============

"Natural end" means the inner loop has nothing more to answer: steering and follow-up
polls still run (pi's behaviour). When they bring nothing either, :func:`natural_end`
names the reason. The other ends, checked by the runner between turns:

=============================================  ==========================================
condition                                      end reason
=============================================  ==========================================
before a request: ``steps`` = ``max_steps``    max_steps
before a request: a token budget would be      usage_limit (:func:`over_budget`)
exceeded (``max_input_tokens``,
``max_output_tokens``)
``abort()``, at any checkpoint                 aborted
after a turn: ``should_stop_after_turn`` true  stopped
nothing pending and no follow-up               :func:`natural_end`: aborted if the last
                                               reply was interrupted, terminated if every
                                               result of the last batch set
                                               ``terminate``, else stop
=============================================  ==========================================

An interrupted reply (:func:`interrupted`) is kept with stop reason ``aborted`` but does
not end the run: its calls are skipped and the steering poll delivers what interrupted it.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

import attrs

from ._events import EndReason
from ._messages import AssistantMessage, ToolCall, Usage

__all__ = ["TERMINATED", "Decision", "decide", "interrupted", "natural_end", "over_budget"]


@attrs.frozen(kw_only=True)
class Decision:
    """``execute``: run ``calls``; else each of ``calls`` gets a skipped result saying
    ``skip_why``. ``end``: the run ends right after this turn with that reason."""

    action: Literal["execute", "skip", "none"]
    calls: tuple[ToolCall, ...] = ()
    skip_why: str = ""
    end: EndReason | None = None
    continues: bool = False
    """Whether the model has results to answer (another request follows)."""


TERMINATED = Decision(action="execute")
"""What a turn comes to when its calls ran and every result set ``terminate``: no further
request (``continues`` is false), and if no steering or follow-up message comes, the run
ends ``terminated`` (see :func:`natural_end`). The runner puts it in place of the turn's
decision, and recognises it by identity (``decide`` never returns it)."""


def _distinct(calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
    if len({call.id for call in calls}) == len(calls):
        return calls
    seen: set[str] = set()
    out = []
    for call in calls:
        if call.id not in seen:
            seen.add(call.id)
            out.append(call)
    return tuple(out)


def decide(message: AssistantMessage, *, continue_after_length: bool = False) -> Decision:
    """Map one finished reply to what the loop does next (see the module docstring)."""
    calls = message.tool_calls
    reason = message.stop_reason
    distinct = _distinct(calls)
    if len(distinct) != len(calls):
        # Counted once over the calls: linear, however many the reply declares.
        dupes = sorted(cid for cid, n in Counter(c.id for c in calls).items() if n > 1)
        return Decision(
            action="skip",
            calls=distinct,
            skip_why=f"the reply declared duplicate tool call ids ({', '.join(dupes)})",
            end="error",
        )
    if reason == "tool_use":
        if calls:
            return Decision(action="execute", calls=calls, continues=True)
        return Decision(action="none", end="error")
    if reason == "stop":
        if calls:
            return Decision(
                action="skip",
                calls=calls,
                skip_why="the model stopped (stop reason stop) without asking for tools",
                end="error",
            )
        return Decision(action="none")
    if reason == "length":
        if calls and continue_after_length:
            return Decision(
                action="skip",
                calls=calls,
                skip_why="the reply was truncated (stop reason length); re-issue the call",
                continues=True,
            )
        return Decision(
            action="skip" if calls else "none",
            calls=calls,
            skip_why="the reply was truncated (stop reason length)",
            end="length",
        )
    why = "the model reported an error" if reason == "error" else "the reply was aborted"
    return Decision(action="skip" if calls else "none", calls=calls, skip_why=why, end=reason)


def interrupted(message: AssistantMessage) -> Decision:
    """What an interrupted reply means: each distinct call (by id) is skipped, and the run
    goes on (no ``end``)."""
    calls = tuple({c.id: c for c in message.tool_calls}.values())
    return Decision(action="skip" if calls else "none", calls=calls, skip_why="interrupted by user")


def natural_end(last_reply: AssistantMessage | None, *, terminated: bool) -> EndReason:
    """Why a run ends once nothing is left to answer and no follow-up came.

    ``aborted`` when the last reply was interrupted (stop reason ``aborted``),
    ``terminated`` when every result of the last batch set ``terminate``, else ``stop``.
    """
    if last_reply is not None and last_reply.stop_reason == "aborted":
        return "aborted"
    return "terminated" if terminated else "stop"


def over_budget(
    used: Usage,
    last_prompt_tokens: int,
    *,
    max_input_tokens: int | None,
    max_output_tokens: int | None,
) -> bool:
    """Whether the next request would go over a token budget, given the run's ``used``
    tokens so far and the prompt tokens of its last request.

    Input: the prompt tokens used so far (input plus cache read and write) plus
    ``last_prompt_tokens`` — the least the next request sends, since the transcript only
    grows — exceed ``max_input_tokens``. Output: the output tokens used so far have
    reached ``max_output_tokens``. None means no budget of that kind.
    """
    if max_input_tokens is not None and used.prompt_tokens + last_prompt_tokens > max_input_tokens:
        return True
    return max_output_tokens is not None and used.output_tokens >= max_output_tokens
