"""The data of a transcript's report: its messages, the pairing verdict, usage and cost,
and, when the transcript has timing markers, its runs as timelines with the batches'
statistics.

Every figure comes from what already computes it: the verdict from
``check_transcript``, token counts from ``Usage`` (summed by ``sum_usage``), a batch's
statistics from the ``TurnStats`` the run recorded in its timing marker.
"""

from __future__ import annotations

import datetime
import json
import os
from typing import TYPE_CHECKING, Any, Final

import attrs

from .._core import (
    AssistantMessage,
    ToolResultMessage,
    TranscriptError,
    Usage,
    check_transcript,
    message_to_json,
    sum_usage,
    total_cost,
)
from .._store import TIMINGS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._core import Message
    from .._store import LoadedTranscript, Marker

__all__ = ["Prices", "transcript_data"]

PREVIEW: Final = 4000
"""The most characters of a call's arguments or result a timeline's tooltip shows."""


@attrs.frozen(kw_only=True)
class Prices:
    """What tokens cost, in dollars per million tokens: given, they price every request
    (without them each is priced by its model from the ``genai-prices`` table, when it
    is installed and knows the model).

    Attributes:
        input: a prompt token read without the cache.
        output: a produced token.
        cache_read: a prompt token read from the cache.
        cache_write: a prompt token written to the cache.
    """

    input: float
    output: float
    cache_read: float = 0.0
    cache_write: float = 0.0

    def cost(self, usage: Usage) -> float:
        """The dollars ``usage`` costs."""
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_write_tokens * self.cache_write
        ) / 1e6


def _usage(usage: Usage, cost: float | None) -> dict[str, Any]:
    out: dict[str, Any] = attrs.asdict(usage)
    out["total"] = usage.total
    out["cost"] = None if cost is None else round(cost, 6)
    return out


def _cut(text: str) -> str:
    return text if len(text) <= PREVIEW else text[:PREVIEW] + f"… ({len(text):,} characters)"


def _result_text(result: ToolResultMessage) -> str:
    parts = []
    for block in result.content:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else f"[{type(block).__name__.lower()}]")
    return "\n".join(parts)


def _verdict(messages: Sequence[Message]) -> dict[str, Any]:
    try:
        check_transcript(messages)
    except TranscriptError as exc:
        return {"paired": False, "violations": list(exc.violations)}
    return {"paired": True, "violations": []}


def _requests(messages: Sequence[Message], prices: Prices | None) -> list[dict[str, Any]]:
    out = []
    for index, m in enumerate(messages):
        if isinstance(m, AssistantMessage):
            out.append(
                {
                    "message": index,
                    "model": m.model,
                    "provider": m.provider,
                    "stop_reason": m.stop_reason,
                    "usage": _usage(
                        m.usage,
                        m.usage.cost(m.model, m.provider)
                        if prices is None
                        else prices.cost(m.usage),
                    ),
                }
            )
    return out


def _runs(messages: Sequence[Message], markers: Sequence[Marker]) -> list[dict[str, Any]]:
    """The timing markers as runs: each with its bars (requests and calls) and batches."""
    calls: dict[str, tuple[int, Any]] = {}
    results: dict[str, ToolResultMessage] = {}
    for index, m in enumerate(messages):
        if isinstance(m, AssistantMessage):
            for call in m.tool_calls:
                calls.setdefault(call.id, (index, call))
        elif isinstance(m, ToolResultMessage):
            results.setdefault(m.tool_call_id, m)
    runs: dict[float, dict[str, Any]] = {}
    for marker in markers:
        if marker.kind != TIMINGS:
            continue
        data = marker.data
        anchor = data.get("run")
        if not isinstance(anchor, int | float):
            continue
        run = runs.get(anchor)
        if run is None:
            started = datetime.datetime.fromtimestamp(anchor, datetime.UTC)
            run = runs[anchor] = {
                "started": started.isoformat(timespec="milliseconds"),
                "bars": [],
                "batches": [],
            }
        turn = data.get("turn", 0)
        request = data.get("request")
        if isinstance(request, dict):
            index = marker.at - 1
            reply = messages[index] if 0 <= index < len(messages) else None
            stop = reply.stop_reason if isinstance(reply, AssistantMessage) else None
            run["bars"].append(
                {
                    "kind": "request",
                    "turn": turn,
                    "lane": 0,
                    "start": request.get("start"),
                    "first_token": request.get("first_token"),
                    "end": request.get("end"),
                    "status": stop,
                    "message": index if stop is not None else None,
                    "label": f"request {turn}",
                    "error": reply.error_message if isinstance(reply, AssistantMessage) else None,
                }
            )
        batch_calls = data.get("calls")
        if isinstance(batch_calls, list):
            ids = []
            for lane, call in enumerate(batch_calls, start=1):
                if not isinstance(call, dict):
                    continue
                call_id = str(call.get("id"))
                ids.append(call_id)
                found = calls.get(call_id)
                result = results.get(call_id)
                arguments = found[1].arguments if found is not None else None
                run["bars"].append(
                    {
                        "kind": "call",
                        "turn": turn,
                        "lane": lane,
                        "id": call_id,
                        "name": str(call.get("name")),
                        "start": call.get("start"),
                        "end": call.get("end"),
                        "waited": call.get("waited", 0.0),
                        "status": call.get("outcome"),
                        "is_error": bool(call.get("is_error")),
                        "message": found[0] if found is not None else None,
                        "label": str(call.get("name")),
                        "args": _cut(json.dumps(arguments, indent=1, ensure_ascii=False)),
                        "result": _cut(_result_text(result)) if result is not None else None,
                    }
                )
            stats = data.get("stats")
            if isinstance(stats, dict):
                wall, critical = stats.get("wall_time", 0.0), stats.get("critical_path", 0.0)
                total = stats.get("total_call_time", 0.0)
                run["batches"].append(
                    {
                        "turn": turn,
                        "calls": len(ids),
                        **stats,
                        "overhead": round(wall - critical, 6),
                        "speedup": round(total / wall, 3) if wall > 0 and len(ids) > 1 else None,
                    }
                )
    return list(runs.values())


def transcript_data(
    path: str | os.PathLike[str], loaded: LoadedTranscript, prices: Prices | None = None
) -> dict[str, Any]:
    """What a transcript's report shows, as JSON data (the page's data block).

    ``messages`` are the transcript's messages as its lines hold them, so the page's
    data reads back to the same messages.
    """
    messages = loaded.messages
    requests = _requests(messages, prices)
    usage = sum_usage(messages)
    total = total_cost(messages) if prices is None else prices.cost(usage)
    return {
        "path": os.fspath(path),
        "messages": [json.loads(message_to_json(m)) for m in messages],
        "verdict": _verdict(messages),
        "torn_line": loaded.torn_line,
        "requests": requests,
        "total": _usage(usage, total),
        # A cost column when any request has a price (an unpriced one shows a dash).
        "priced": prices is not None or any(r["usage"]["cost"] is not None for r in requests),
        "runs": _runs(messages, loaded.markers),
    }
